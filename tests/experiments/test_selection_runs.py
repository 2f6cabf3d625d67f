"""The tables of the selection chapters (attnbook.experiments.selection_runs)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from attnbook.data.selection import (
    assumption_one_data,
    partially_relevant_data,
    two_relevant_data,
)
from attnbook.experiments.selection_runs import (
    multipliers,
    outcome_table,
    pair_derivative_rows,
    partial_row,
    reduction_row,
    separable,
    theorem_row,
    two_relevant_row,
)
from attnbook.theory.flow import (
    batched_gradient_flow,
    one_step_flows,
    one_step_setting,
)
from attnbook.theory.frequency import average_signed_frequency
from attnbook.theory.max_margin import max_margin_solution

E_HAND = torch.tensor([[2.0, 0.0], [0.0, 1.0], [0.0, 0.0], [-1.0, 0.0]]).double()


def test_multipliers_of_the_problem_solved_by_hand():
    hand = max_margin_solution(E_HAND, [[0, 2], [1, 2, 2], [0, 3]], [0, 1, 0])
    lam = multipliers(hand)
    assert set(lam) == {(0, 2), (1, 2), (0, 3)}
    assert [lam[(0, 2)], lam[(1, 2)], lam[(0, 3)]] == pytest.approx(
        [0.25, 1.0, 0.0], abs=1e-7
    )


def test_a_contradictory_selection_is_not_separable():
    assert separable(E_HAND, [[0, 2]], [0])
    assert not separable(E_HAND, [[0, 1], [0, 1]], [0, 1])


def test_outcome_table_one_letter_per_instance():
    runs = pd.DataFrame(
        {
            "seed": [2, 1, 1, 2],
            "value_scale": [1.0, 1.0, 2.0, 2.0],
            "ratio_scale": [0.5, 0.5, 0.5, 0.5],
            "mark": ["C", "S", "u", "S"],
        }
    )
    table = outcome_table(runs, ["ratio_scale"])
    assert table[0.5].tolist() == ["SC", "uS"]


@pytest.fixture(scope="module")
def theorem_run():
    data = assumption_one_data(
        6, n_irrelevant=10, length=4, rng=np.random.default_rng(0)
    )
    ((E1, v, p0),), _ = one_step_flows([data], 16, 80.0, seed0=0, log_t_max=1.0)
    sol = max_margin_solution(E1, data.counts, data.important)
    (path,) = batched_gradient_flow(
        [(E1, v, data.counts, data.labels, p0)],
        log_t_max=12.0,
        selected=[data.important],
        directions=[torch.as_tensor(sol.p)],
    )
    return data, E1, v, sol, path


def test_theorem_row_reports_hypotheses_and_path(theorem_run):
    data, E1, v, sol, path = theorem_run
    row = theorem_row(data, E1, v, sol, path, late_from=6.0)
    for key in ("value gap", "||p_mm||", "support", "KKT residual", "cos_end", "steps"):
        assert key in row
    assert row["KKT residual"] < 1e-6 and row["support"] >= 1
    assert 0.0 <= row["other mass (max)"] <= 1.0


def test_rows_of_two_relevant_and_partially_relevant_runs():
    rng = np.random.default_rng(1)
    two = two_relevant_data(6, n_irrelevant=20, length=6, rng=rng)
    partial = partially_relevant_data(6, n_irrelevant=20, length=6, rng=rng)
    relevant = [two.relevant, partial.relevant]
    settings, paths = one_step_flows(
        [two, partial], 64, 80.0, seed0=0, log_t_max=30.0, selected=relevant
    )
    (E1, v, _), path = settings[0], paths[0]
    row = two_relevant_row(two, E1, v, path)
    assert row["tokens selected (max)"] >= 1
    assert 0.0 <= row["selected = largest value"] <= 1.0
    rows = pair_derivative_rows(two, E1, v, path, 5.0)
    assert len(rows) == 2 * two.counts.n_sequences
    assert {r["when"] for r in rows} == {"p(0)", "log t = 5"}
    assert max(abs(r["autograd"] - r["general"]) for r in rows) < 1e-12
    (E1, v, _), path = settings[1], paths[1]
    row = partial_row(partial, E1, v, path)
    assert row["of which select it"] <= row["positive seqs with it"]


def test_reduction_row_matches_the_reduced_flow():
    # five pairs: each relevant token in one sequence, so all share one |alpha*|
    data = assumption_one_data(
        5, n_irrelevant=10, length=4, rng=np.random.default_rng(2)
    )
    alpha = average_signed_frequency(data.counts, data.labels, data.vocab_size)
    alpha_star = float(np.abs(alpha.numpy()[data.important]).min())
    eta = 2 * 2.0 / alpha_star  # the value B = 2
    setting = one_step_setting(data, 16, eta, seed=0, embed_scale=0.0, cls_scale=0.01)
    (path,) = batched_gradient_flow(
        [(setting.E1, setting.v, data.counts, data.labels, setting.p0)],
        log_t_max=4.0,
        dtau=0.005,  # Euler's error in u is of order dtau
        selected=[data.important],
    )
    row = reduction_row(setting, path, 2.0, 4)
    assert list(row)[:2] == ["value B", "u(0)"]
    assert row["value B"] == pytest.approx(2.0 * float(setting.v @ setting.v))
    assert row["u(end), flow on p"] == pytest.approx(row["u(end), reduced"], abs=0.02)
