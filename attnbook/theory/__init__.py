"""The theory's closed forms and their numerical counterparts.

- :mod:`~attnbook.theory.frequency`      -- the average signed frequency ``alpha``;
- :mod:`~attnbook.theory.one_step`       -- one gradient step on ``E`` and its
  closed-form prediction;
- :mod:`~attnbook.theory.one_step_check` -- the step from a seeded initialization,
  measured against the prediction, and the statistics that compare them;
- :mod:`~attnbook.theory.max_margin`     -- the max-margin token-selection problem and
  its KKT check;
- :mod:`~attnbook.theory.flow`           -- gradient flow on the ``<cls>`` vector with
  frozen ``E``.

Layer: above :mod:`attnbook.models`; imports the engine, data and models layers.
"""
