"""The tables of the one-step chapter (attnbook.experiments.one_step_runs)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from attnbook.data.synthetic import SyntheticSpec, sample_sequences
from attnbook.experiments.one_step_runs import (
    cls_step_row,
    kclass_correlations,
    regime_row,
    slope_table,
    two_steps_row,
)
from attnbook.theory.frequency import average_signed_frequency
from attnbook.theory.one_step_check import predicted_pearson, run_one_step


@pytest.fixture(scope="module")
def small():
    spec = SyntheticSpec(n_positive=4, n_negative=4, n_neutral=12, relevant_rate=0.3)
    data = sample_sequences(spec, 200, np.random.default_rng(0))
    alpha = average_signed_frequency(data.counts, data.labels, data.counts.vocab_size)
    return data.counts, data.labels, alpha


def test_regime_row_is_the_measured_and_the_predicted_correlation(small):
    counts, labels, alpha = small
    res = run_one_step(counts, labels, 256, init_scale=1e-3, eta=1.0, alpha=alpha)
    row = regime_row(res, 1e-3, 256)
    assert list(row) == [
        "Pearson r (measured)",
        "r* (lemma)",
        "relative increment error",
    ]
    assert row["r* (lemma)"] == predicted_pearson(res.pred_value, 1e-3, res.vv, 256)
    assert 0.9 < row["Pearson r (measured)"] <= 1.0
    assert row["relative increment error"] == res.relative_increment_error


def test_cls_step_row_predicts_half_eta_v_dot_p(small):
    counts, labels, alpha = small
    res = run_one_step(counts, labels, 256, init_scale=1e-3, eta=2.0, alpha=alpha)
    row = cls_step_row(res, 2.0)
    assert row["predicted coef_p"] == pytest.approx(res.vp)
    assert row["coef_p"] == pytest.approx(row["predicted coef_p"], rel=0.2)
    assert row["sd(E0.p)"] > 0


def test_slope_table_recovers_exact_power_laws():
    x = np.array([1.0, 2.0, 4.0, 8.0])
    frame = pd.DataFrame({"x": x, "y": 3 * x**-0.5, "z": x**2})
    table = slope_table(
        {"y vs x": (frame, "x", "y", -0.5), "z vs x": (frame, "x", "z", 2)}
    )
    assert list(table.index) == ["y vs x", "z vs x"]
    assert list(table.columns) == ["predicted", "fitted", "standard error"]
    assert np.allclose(table["fitted"], table["predicted"])
    assert np.allclose(table["standard error"], 0.0, atol=1e-12)


def test_kclass_correlations_one_row_per_run():
    a = np.arange(6.0).reshape(3, 2)
    run = {"measured": a, "diagonal": 2 * a, "full": a + 1, "increment": -a}
    table = kclass_correlations({"first": run, "second": run})
    assert list(table.index) == ["first", "second"]
    assert table.iloc[0].tolist() == pytest.approx([1.0, 1.0, -1.0])


def test_two_steps_repeat_the_first_while_the_outputs_are_small(small):
    counts, labels, alpha = small
    row = two_steps_row(counts, labels, alpha, 256, 1e-3, 1.0)
    assert row["eta"] == 1.0 and row["max |f| after step 1"] < 0.1
    assert row["slope of E^2.v on eta alpha ||v||^2"] == pytest.approx(1.0, abs=0.05)


def test_dimension_table_one_row_per_dimension(small):
    import torch

    from attnbook.experiments.one_step_runs import dimension_table

    counts, labels, alpha = small
    y = torch.as_tensor(labels, dtype=torch.float64)
    table = dimension_table(counts, y, alpha, (8, 64), init_scale=1e-3, eta=1.0)
    assert list(table.index) == [8, 64]
    assert table.loc[64, "d / V"] == 64 / counts.vocab_size
    r = run_one_step(
        counts, y, 8, init_scale=1e-3, eta=1.0, seed=8, dtype=torch.float32, alpha=alpha
    )
    expected = predicted_pearson(r.pred_value, 1e-3, r.vv, 8)
    assert table.loc[8, "r predicted (noise only)"] == expected
    assert (table["r measured"] <= 1).all()
