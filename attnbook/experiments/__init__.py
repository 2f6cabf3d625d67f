"""Experiments on real data and the extensions.

- :mod:`~attnbook.experiments.importance` -- token importance, binned statistics, rank
  correlations;
- :mod:`~attnbook.experiments.evaluation` -- loss, accuracy and paired comparisons on a
  corpus;
- :mod:`~attnbook.experiments.real_data`  -- the real-data experiment (four models, one
  protocol);
- :mod:`~attnbook.experiments.extensions` -- class maps and trend statistics of the
  extensions.

Layer: above :mod:`attnbook.theory`; may import every layer below it.
"""
