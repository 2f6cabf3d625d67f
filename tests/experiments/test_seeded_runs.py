"""The runs of several initialisations: the range of a metric over each kind."""

from __future__ import annotations

import numpy as np

from attnbook.book.controls import Run, metric_ranges


def test_metric_ranges_per_kind_and_metric():
    runs = [
        Run(kind, seed, np.ones(2), {}, {}, {"acc": acc, "loss": -acc})
        for kind, seed, acc in (
            ("labels", 1, 0.9),
            ("labels", 2, 0.8),
            ("shuffled", 3, 0.5),
        )
    ]
    out = metric_ranges(runs, {"acc": "a"}, {"labels": "m", "shuffled": "m_s"})
    assert out == {"m_a_min": 0.8, "m_a_max": 0.9, "m_s_a_min": 0.5, "m_s_a_max": 0.5}
    assert all(isinstance(v, float) for v in out.values())
