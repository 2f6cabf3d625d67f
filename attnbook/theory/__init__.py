"""The theory's closed forms and their numerical counterparts: the average signed
frequency, the one gradient step, the max-margin selection problem, the gradient flow on
the ``<cls>`` vector and the map of where it selects (layer above the models)."""
