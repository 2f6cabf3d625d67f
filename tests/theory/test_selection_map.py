"""The selection map: the two-token reduction of the flow on p (its slope, the collapse
threshold, the rest point, the reduction against the full flow at E0 = 0), the outcome
of a run and the boundary between the outcomes."""

import numpy as np
import pandas as pd
import pytest
import torch

from attnbook.data.selection import assumption_one_data
from attnbook.theory.flow import batched_gradient_flow, one_step_setting
from attnbook.theory.frequency import average_signed_frequency
from attnbook.theory.selection_map import (
    boundary_brackets,
    classify_outcome,
    collapse_threshold,
    decided_outcome,
    reduced_flow,
    reduced_rest_point,
    reduced_slope,
    rest_point_mass,
    value_map,
)

from conftest import assumption_instance


def reduced_loss(u, value: float, length: int) -> np.ndarray:
    """phi_B(u) = [l(B pi(u)) + l(B pi(-u))] / 2, pi(u) = 1 / (1 + (T - 1) e^{-u})."""
    if length < 2:
        raise ValueError(f"length must be an integer >= 2, got {length!r}")
    u = np.asarray(u, dtype=np.float64)
    pi = [1 / (1 + (length - 1) * np.exp(-x)) for x in (u, -u)]
    return 0.5 * sum(np.logaddexp(0.0, -value * q) for q in pi)


def test_slope_is_the_derivative_of_the_loss():
    u = np.linspace(-6, 6, 25)
    h = 1e-6
    for value in (0.5, 3.0, 8.0):
        numeric = (
            (reduced_loss(u + h, value, 8) - reduced_loss(u - h, value, 8)) / 2 / h
        )
        assert np.allclose(reduced_slope(u, value, 8), numeric, atol=1e-8)
    # symmetric in u, flat at 0
    assert np.allclose(reduced_loss(u, 3.0, 8), reduced_loss(-u, 3.0, 8))
    assert reduced_slope(0.0, 3.0, 8) == 0.0


def test_loss_limits():
    # the symmetric point: l(B / T); the collapsed state: (l(B) + log 2) / 2
    value = 2.0
    assert reduced_loss(0.0, value, 8) == pytest.approx(np.log1p(np.exp(-value / 8)))
    far = reduced_loss(60.0, value, 8)
    assert far == pytest.approx(0.5 * (np.log1p(np.exp(-value)) + np.log(2)))


def test_collapse_threshold_and_rest_point():
    b_c = collapse_threshold(8)
    assert 4.5 < b_c < 4.65
    # below the threshold the slope is negative on the whole half-line, above it rises
    u = np.linspace(1e-3, 40, 4001)
    assert (reduced_slope(u, 0.99 * b_c, 8) < 0).all()
    assert np.isinf(reduced_rest_point(0.99 * b_c, 8))
    rest = reduced_rest_point(1.2 * b_c, 8)
    assert 0 < rest < 40
    assert abs(reduced_slope(rest, 1.2 * b_c, 8)) < 1e-6
    # the threshold grows with the length, roughly like 2 log T
    thresholds = [collapse_threshold(t) for t in (4, 16, 64)]
    assert thresholds == sorted(thresholds)
    assert all(1.8 < b / np.log(t) < 2.8 for b, t in zip(thresholds, (4, 16, 64)))


def test_rest_point_mass_is_the_weaker_class_share():
    b_c = collapse_threshold(8)
    assert rest_point_mass(0.99 * b_c, 8) == 0.0  # no rest point: the class is lost
    masses = [rest_point_mass(b, 8) for b in (4.6, 5.0, 6.0, 8.0)]
    assert masses == sorted(masses) and 0 < masses[0] < 1e-3 and masses[-1] < 0.5
    rest = reduced_rest_point(5.0, 8)
    assert masses[1] == pytest.approx(1 / (1 + 7 * np.exp(rest)))


def test_argument_errors():
    with pytest.raises(ValueError, match="length"):
        collapse_threshold(1)
    with pytest.raises(ValueError, match="value"):
        reduced_slope(0.0, -1.0, 8)
    with pytest.raises(ValueError, match="t_end"):
        reduced_flow(0.1, 1.0, 8, 1.0, float("nan"))


@pytest.mark.parametrize("value", [2.0, 6.0])
def test_reduction_matches_the_flow_on_p(value):
    data = assumption_one_data(20, rng=np.random.default_rng(0))
    alpha = average_signed_frequency(data.counts, data.labels, data.vocab_size)
    alpha_star = float(alpha[data.important].abs().min())
    s = one_step_setting(
        data, 64, 2 * value / alpha_star, seed=0, embed_scale=0.0, cls_scale=0.01
    )
    (path,) = batched_gradient_flow(
        [(s.E1, s.v, data.counts, data.labels, s.p0)],
        log_t_max=8.0,
        selected=[data.important],
        max_steps=3000,
        on_max_steps="stop",
    )
    v = s.v.numpy()
    u = value * (path.p @ v)
    measured = value * float(v @ v)
    # every embedding lies on v: the flow has one coordinate
    assert torch.linalg.matrix_rank(s.E1).item() == 1
    expected = reduced_flow(u[0], measured, 8, measured**2 / float(v @ v), path.t[-1])
    assert abs(u[-1] - expected) <= 0.02  # Euler's error, of order dtau


def test_classify_outcome():
    labels = [1, -1, 1, -1]
    assert classify_outcome([0.995, 1.0, 0.999, 0.99], labels) == "selects"
    # every negative sequence below half: the class is abandoned
    assert classify_outcome([0.995, 0.2, 0.7, 0.1], labels) == "collapses"
    # one negative sequence of two below half: part of a class only
    assert classify_outcome([0.995, 0.2, 0.7, 0.6], labels) == "loses part"
    assert classify_outcome([0.2, 0.7, 0.6, 0.3], labels) == "loses part"
    assert classify_outcome([0.995, 0.7, 0.9, 0.6], labels) == "undecided"


def test_value_map_and_boundary():
    data = [assumption_instance(seed) for seed in range(2)]
    table = value_map(
        data,
        [dict(values=[0.5, 6.0], ratios=[4.0], dims=[32], cls_scales=[1.0])],
        log_t_max=15.0,
        settle=5.0,
    )
    assert len(table) == 4
    assert set(table["outcome"]) <= {"selects", "collapses", "loses part", "undecided"}
    # the step and the scale follow the value and the ratio
    alpha_star = 5 / (20 * 5)  # each relevant token in 5 of 20 sequences of length 5
    assert np.allclose(table["eta"], 2 * table["value_scale"] / alpha_star)
    assert np.allclose(table["embed_scale"], table["value_scale"] / 4.0)
    brackets = boundary_brackets(
        pd.DataFrame(
            {
                "ratio_scale": [2.0, 2.0, 2.0, 8.0],
                "value": [1.0, 3.0, 2.0, 1.0],
                "outcome": ["collapses", "selects", "undecided", "collapses"],
            }
        )
    )
    assert list(brackets.index) == [2.0]  # r = 8 has one outcome only
    assert brackets.loc[2.0, "boundary"] == 2.0
    assert brackets.loc[2.0, "half_width"] == 1.0


def test_decided_outcome_needs_a_settled_end():
    data = assumption_instance(0)
    s = one_step_setting(data, 8, 40.0, seed=0)
    (path,) = batched_gradient_flow(
        [(s.E1, s.v, data.counts, data.labels, s.p0)],
        log_t_max=12.0,
        selected=[data.important],
    )
    labels = data.labels
    end = classify_outcome(path.selected_mass[-1], labels)
    assert decided_outcome(path, labels, 12.0, 5.0) == end
    # a path that did not reach its end is undecided
    assert decided_outcome(path, labels, 13.0, 5.0) == "undecided"
