"""Experiments on real data and the extensions.

- :mod:`~attnbook.experiments.importance` -- token importance, binned statistics, rank
  correlations;
- :mod:`~attnbook.experiments.evaluation` -- loss and accuracy on a corpus;
- :mod:`~attnbook.experiments.real_data`  -- the starting points every real-data model
  shares;
- :mod:`~attnbook.experiments.curves`     -- learning curves at equal budgets (Adam or
  per-group gradient descent) and within-bin spread ratios along them;
- :mod:`~attnbook.experiments.picture`    -- the runs behind the real-data picture:
  seeds, ablations, gradient descent, the shuffled-label null;
- :mod:`~attnbook.experiments.robustness` -- balanced samples, shuffled labels, the
  picture's (partial) rank correlations;
- :mod:`~attnbook.experiments.synthetic_picture` -- the picture on synthetic data;
- :mod:`~attnbook.experiments.extensions` -- class maps and trend statistics of the
  extensions.

Layer: above :mod:`attnbook.theory`; may import every layer below it.
"""
