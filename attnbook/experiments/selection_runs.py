"""The tables of the chapters on selection by the class token, one row per run of the
flow on ``p``."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
import torch

from attnbook.theory.flow import (
    FlowPath,
    limit_selection,
    pair_derivatives,
    unselected_mass,
    value_gap,
)
from attnbook.theory.max_margin import (
    MaxMarginSolution,
    kkt_residuals,
    max_margin_solution,
)
from attnbook.theory.selection_map import reduced_flow, reduced_rest_point


def multipliers(solution: MaxMarginSolution) -> dict[tuple[int, int], float]:
    """Each constraint's multiplier, keyed by (winning token, losing token)."""
    pairs = zip(solution.winners.tolist(), solution.losers.tolist())
    return dict(zip(pairs, solution.dual))


def separable(E: torch.Tensor, sequences: object, selected: object) -> bool:
    """Whether the selection's max-margin problem has a solution."""
    try:
        max_margin_solution(E, sequences, selected)
    except ValueError:
        return False
    return True


def theorem_row(
    instance,
    E1: torch.Tensor,
    v: torch.Tensor,
    solution: MaxMarginSolution,
    path: FlowPath,
    late_from: float,
) -> dict[str, float]:
    """The implicit-bias theorem's hypotheses and conclusions on one instance: over
    the checkpoints with ``log t >= late_from``, the largest relative increase of ``1 -
    cos(p, p_mm)``, the slope of ``||p||`` in ``log t`` over ``||p_mm||``, and ``k`` in
    ``1 - cos ~ (log t)^-k``."""
    p_end = torch.as_tensor(path.p[-1], device=E1.device)
    counts, important = instance.counts, instance.important
    cos = path.cosines(solution.p)
    with np.errstate(divide="ignore"):
        log_t = np.log(path.t)
    late = log_t >= late_from
    if late.sum() < 3:
        raise ValueError(f"fewer than 3 checkpoints with log t >= {late_from}")
    gap = 1.0 - cos[late]
    slope = np.polyfit(log_t[late], path.norms[late], 1)[0]
    k = -np.polyfit(np.log(log_t[late]), np.log(np.maximum(gap, 1e-300)), 1)[0]
    return {
        "value gap": value_gap(E1, v, counts, instance.labels, important).min(),
        "||p_mm||": np.linalg.norm(solution.p),
        "support": int(solution.support.sum()),
        "KKT residual": max(kkt_residuals(solution).values()),
        "cos_end": float(cos[-1]),
        "max_rel_increase": float((np.diff(gap) / gap[:-1]).max()),
        "slope_ratio": float(slope / np.linalg.norm(solution.p)),
        "angle_exponent": float(k),
        "min_mass": float(path.selected_mass[-1].min()),
        "min_grad_along": float(path.grad_along.min()),
        "other mass (max)": unselected_mass(E1, p_end, counts, important).max(),
        "steps": path.steps,
    }


def two_relevant_row(
    instance, E1: torch.Tensor, v: torch.Tensor, path: FlowPath
) -> dict:
    """What the limit of a flow selects with two relevant tokens per sequence."""
    values = (E1 @ v).cpu().numpy()
    relevant, labels = instance.relevant, instance.labels
    best = [r[np.argmax(y * values[r])] for r, y in zip(relevant, labels)]
    p_end = torch.as_tensor(path.p[-1], device=E1.device)
    chosen = limit_selection(E1, p_end, instance.counts)
    mm_chosen = max_margin_solution(E1, instance.counts, chosen)
    mm_all = max_margin_solution(E1, instance.counts, relevant)
    scores = (E1 @ p_end).cpu().numpy()
    kept_best = [c.tolist() == [b] for c, b in zip(chosen, best)]
    passed_over = [
        scores[c[0]] - scores[b] for c, b, k in zip(chosen, best, kept_best) if not k
    ]
    return {
        "relevant mass (min)": path.selected_mass[-1].min(),
        "irrelevant mass (max)": unselected_mass(
            E1, p_end, instance.counts, relevant
        ).max(),
        "tokens selected (max)": max(len(c) for c in chosen),
        "selected = largest value": np.mean(kept_best),
        "cos with mm(selection)": path.cosines(mm_chosen.p)[-1],
        "cos with mm(all relevant)": path.cosines(mm_all.p)[-1],
        "deficit (min)": min(passed_over, default=np.nan),
    }


def pair_derivative_rows(
    instance, E1: torch.Tensor, v: torch.Tensor, path: FlowPath, log_t: float
) -> list[dict]:
    """The rate of exchange between the two relevant tokens of every sequence, at
    ``p(0)`` and at ``log_t``."""
    k = int(np.argmin(np.abs(np.log(np.maximum(path.t, 1e-300)) - log_t)))
    values = (E1 @ v).cpu().numpy()
    sequences = instance.counts.to_sequences()
    rows = []
    for when, p in (("p(0)", path.p[0]), (f"log t = {log_t:g}", path.p[k])):
        scores = (E1 @ torch.as_tensor(p, device=E1.device)).cpu().numpy()
        for seq, y, rel in zip(sequences, instance.labels, instance.relevant):
            toks, cnts = np.unique(seq, return_counts=True)
            a, a2 = (int(np.flatnonzero(toks == r)[0]) for r in rel)
            out = pair_derivatives(scores[toks], values[toks], cnts, int(y), a, a2)
            rows.append({"when": when, **out})
    return rows


def partial_row(instance, E1: torch.Tensor, v: torch.Tensor, path: FlowPath) -> dict:
    """What the limit of a flow selects with a partially relevant token (class 2)."""
    values = (E1 @ v).cpu().numpy()
    p_end = torch.as_tensor(path.p[-1], device=E1.device)
    chosen = limit_selection(E1, p_end, instance.counts)
    partial = instance.token_class == 2
    sequences = instance.counts.to_sequences()
    has_partial = np.array([partial[s].any() for s in sequences])
    picks_partial = np.array([partial[c].any() for c in chosen])
    positive = instance.labels == 1
    mm = max_margin_solution(E1, instance.counts, chosen)
    return {
        "b partial": values[partial][0],
        "b completely positive (max)": values[instance.token_class == 1].max(),
        "positive seqs with it": int((has_partial & positive).sum()),
        "of which select it": int((picks_partial & positive).sum()),
        "negative seqs selecting it": int((picks_partial & ~positive).sum()),
        "cos with mm(selection)": path.cosines(mm.p)[-1],
        "important mass (min)": path.selected_mass[-1].min(),
    }


def reduction_row(setting, path: FlowPath, value_scale: float, length: int) -> dict:
    """The flow on ``p`` from ``E0 = 0`` against the two-token reduction."""
    v = setting.v.numpy()
    u = value_scale * (path.p @ v)
    value = value_scale * float(v @ v)
    return {
        "value B": value,
        "u(0)": u[0],
        "log t (end)": np.log(path.t[-1]),
        "u(end), flow on p": u[-1],
        "u(end), reduced": reduced_flow(
            u[0], value, length, value**2 / float(v @ v), path.t[-1]
        ),
        "rest point u*": reduced_rest_point(value, length),
        "important mass (min)": path.selected_mass[-1].min(),
    }


def outcome_table(runs: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """One letter per instance (S selects, C collapses, U undecided; lower case: gap
    below the spread), value down, ``columns`` across."""
    marks = runs.sort_values("seed").groupby(["value_scale", *columns])["mark"]
    return marks.agg("".join).unstack(columns).fillna("")
