"""The theory's closed forms and their numerical counterparts: the average signed
frequency, the one gradient step and its prediction, the max-margin selection problem,
the gradient flow on the ``<cls>`` vector and what its paths say, and the map of where
it selects with its two-token reduction.

Layer: above :mod:`attnbook.models`; imports the engine, data and models layers.
"""
