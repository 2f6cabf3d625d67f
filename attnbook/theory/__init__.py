"""The theory's closed forms and their numerical counterparts.

- :mod:`~attnbook.theory.frequency`      -- the average signed frequency ``alpha``;
- :mod:`~attnbook.theory.one_step`       -- one gradient step on ``E`` and its
  closed-form prediction;
- :mod:`~attnbook.theory.one_step_check` -- the step from a seeded initialization,
  measured against the prediction, and the statistics that compare them;
- :mod:`~attnbook.theory.selections`     -- a selection of tokens per sequence: its
  max-margin constraints and the score gaps of a direction;
- :mod:`~attnbook.theory.max_margin`     -- the max-margin token-selection problem and
  its KKT check;
- :mod:`~attnbook.theory.flow_problem`   -- the data of a flow on the ``<cls>`` vector
  with frozen ``E``, and the path it records;
- :mod:`~attnbook.theory.flow_batch`     -- the flow's one integrator (log-time Euler
  steps), for many independent flows as one tensor program;
- :mod:`~attnbook.theory.flow`           -- gradient flow of one problem (the batch of
  one), its loss and gradient at a point;
- :mod:`~attnbook.theory.flow_analysis`  -- what a flow path says (attention on a
  selection, the limit's selection, value gap, statistics against ``p_mm``), the
  theorem's one-step setting, and the score-space derivative along a pair of tokens;
- :mod:`~attnbook.theory.selection_map`  -- where the flow selects: the map over the
  value the step gives the relevant tokens, the ratio of the step's moved part to the
  random part, the dimension and ``p(0)``, and the boundary between the outcomes;
- :mod:`~attnbook.theory.two_token`      -- the flow reduced to one coordinate in the
  value-only limit, and the value below which it abandons a class.

Layer: above :mod:`attnbook.models`; imports the engine, data and models layers.
"""
