"""The figures of the chapters on the model, the one step and the selection
(attnbook.book.theory_figures, attnbook.book.selection_figures): each draws from small
inputs the panels it promises."""

from __future__ import annotations

from types import SimpleNamespace

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import torch

from attnbook.book.selection_figures import (
    growth_and_angle,
    path_planes,
    regime_map,
)
from attnbook.book.theory_figures import (
    attention_panels,
    breakdown_panels,
    error_scaling,
    kclass_scatter,
    one_step_scatter,
)

RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def close_figures():
    matplotlib.use("Agg")
    yield
    plt.close("all")


def _result(n: int = 12):
    pred = np.linspace(-1, 1, n)
    return SimpleNamespace(pred_value=pred, value1=pred + 0.01 * RNG.standard_normal(n))


def test_attention_panels_one_panel_per_scale_and_the_weights():
    E = torch.eye(4, dtype=torch.float64)
    fig, weights = attention_panels(
        E, [0, 1, 2, 3, 0], np.array([1, -1, 0, 0]), 0, (0, 5)
    )
    assert len(weights) == 2 and np.allclose(weights[0], 0.2)
    assert weights[1][[0, 4]].sum() > 0.9
    assert len(fig.axes) == 2


def test_one_step_figures():
    main = _result()
    fig = one_step_scatter(
        main, np.array([1, -1, 0] * 4), {1e-3: _result(), 1e-4: _result()}, 64
    )
    assert len(fig.axes) == 2
    sweep = pd.DataFrame(
        {
            "dim": [32, 64, 128],
            "init_scale": [1e-3, 1e-2, 1e-1],
            "total_error": [1.0, 0.7, 0.5],
            "increment_error": [0.1, 0.07, 0.05],
            "second_order_error": [0.01, 0.005, 0.0025],
        }
    )
    assert len(error_scaling(sweep, sweep).axes) == 2
    run = {
        "measured": RNG.standard_normal((5, 2)),
        "diagonal": RNG.standard_normal((5, 2)),
    }
    fig = kclass_scatter([run, run], ["a", "b"], [["x", "y"], ["x", "y"]])
    assert len(fig.axes) == 2


def test_breakdown_panels():
    small_d = pd.DataFrame(
        {
            "init_scale": [1e-2] * 2 + [1e-1] * 2,
            "dim": [8, 16] * 2,
            "pearson": [0.5, 0.7, 0.2, 0.4],
            "predicted_pearson": [0.5, 0.7, 0.2, 0.4],
        }
    )
    large_sigma = pd.DataFrame(
        {
            "dim": [64, 64],
            "sigma_over_sqrt_d": [0.01, 1.0],
            "relative_increment_error": [0.01, 1.0],
        }
    )
    large_eta = pd.DataFrame(
        {
            "eta": [0.1, 1.0],
            "pearson": [0.9, 0.99],
            "relative_increment_error": [1e-3] * 2,
        }
    )
    assert len(breakdown_panels(small_d, large_sigma, large_eta).axes) == 4


def _path(direction: np.ndarray) -> SimpleNamespace:
    log_t = np.linspace(0.0, 40.0, 81)
    t = np.concatenate([[0.0], np.exp(log_t[1:])])
    p = np.outer(np.maximum(log_t, 1.0), direction) + np.array([0.0, 1.0])
    return SimpleNamespace(
        t=t,
        p=p,
        norms=np.linalg.norm(p, axis=1),
        cosines=lambda q: p @ q / np.linalg.norm(p, axis=1) / np.linalg.norm(q),
    )


def test_selection_path_figures():
    sol = SimpleNamespace(p=np.array([2.0, 0.0]))
    paths = [_path(np.array([2.0, 0.0])) for _ in range(3)]
    assert len(growth_and_angle(paths, [sol] * 3, 40.0, 20.0).axes) == 2
    assert len(path_planes(paths, [sol] * 3).axes) == 3  # two panels and a colour bar


def test_regime_map():
    regime = pd.DataFrame(
        {
            "value": [1.0, 5.0, 6.0, 4.0],
            "ratio_scale": [2.0, 2.0, 8.0, 4.0],
            "outcome": ["collapses", "selects", "undecided", "loses part"],
            "hypothesis": [True, True, False, True],
            "main": [True, True, False, True],
            "seed": [1000, 1001, 1002, 1000],
            "Q": [0.5, 1.3, 1.1, 0.95],
        }
    )
    fig = regime_map(
        regime,
        regime,
        b_c=4.6,
        ratio_constant=1.5,
        band=0.1,
        ratios=[2.0, 8.0],
        seed0=1000,
    )
    assert len(fig.axes) == 2
