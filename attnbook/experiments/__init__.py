"""Experiments on real data and the extensions: token importance and the statistics of
the real-data picture (``importance``, ``robustness``), its runs (``real_data``,
``curves``, ``picture``, ``synthetic_picture``), and the helpers of the setup, selection
and extension chapters.

Layer: above :mod:`attnbook.theory`; may import every layer below it.
"""
