"""The models, their parameters, losses and training loop.

- :mod:`~attnbook.models.parameters` -- parameter checks, layouts and the one
  initializer;
- :mod:`~attnbook.models.attention`  -- the one-layer model ``f(X)``: dense reference
  and count engine;
- :mod:`~attnbook.models.count_engine` -- the count engine's outputs and gradients for
  any number of heads, with its checks;
- :mod:`~attnbook.models.losses`     -- the logistic loss and accuracy;
- :mod:`~attnbook.models.multiclass` -- the K-class model and the cross-entropy loss;
- :mod:`~attnbook.models.two_layer`  -- a first self-attention layer before the
  ``<cls>`` layer;
- :mod:`~attnbook.models.mlp_head`   -- an MLP head after the attention;
- :mod:`~attnbook.models.training`   -- the full-batch training loop and its stopping
  rules.

Layer: above :mod:`attnbook.data`; imports :mod:`attnbook.engine` and
:mod:`attnbook.data`.
"""
