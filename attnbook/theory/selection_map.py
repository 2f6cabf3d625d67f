"""Where the flow on ``p`` selects the important tokens after one step: the two-token
reduction at ``E0 = 0``, the map over the value ``B`` and the ratio ``r`` of the step's
moved part to the random part (:func:`value_map`), and the boundary between outcomes."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
import torch
from scipy.integrate import solve_ivp
from scipy.special import expit

from attnbook.data.selection import SelectionData
from attnbook.theory.flow import batched_gradient_flow, one_step_setting, value_gap
from attnbook.theory.frequency import average_signed_frequency

__all__ = [
    "reduced_slope",
    "collapse_threshold",
    "reduced_rest_point",
    "rest_point_mass",
    "reduced_flow",
    "classify_outcome",
    "decided_outcome",
    "value_map",
    "boundary_brackets",
]


# ---- the two-token reduction: on data built in pairs with E0 = 0 the loss depends only
# on the score gap u of the positive relevant tokens, phi_B(u) = [l(B pi(u)) +
# l(B pi(-u))] / 2 with pi(u) = 1 / (1 + (T - 1) e^{-u}) and l(z) = log(1 + e^{-z})
def _attention(u: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
    """``pi(u)`` and ``pi(u) (1 - pi(u))`` to full relative precision."""
    shift = np.log(length - 1.0)
    pi = expit(u - shift)
    return pi, pi * expit(shift - u)


def _check(value: float, length: int) -> None:
    if not (np.isfinite(value) and value >= 0):
        raise ValueError(f"value must be a finite number >= 0, got {value!r}")
    if not (isinstance(length, (int, np.integer)) and length >= 2):
        raise ValueError(f"length must be an integer >= 2, got {length!r}")


def reduced_slope(u: np.ndarray | float, value: float, length: int) -> np.ndarray:
    """``phi_B'(u) = B/2 [-s(-B pi(u)) pi'(u) + s(-B pi(-u)) pi'(-u)]`` (``s``
    logistic)."""
    _check(value, length)
    u = np.asarray(u, dtype=np.float64)
    plus, dplus = _attention(u, length)
    minus, dminus = _attention(-u, length)
    return (
        0.5 * value * (-expit(-value * plus) * dplus + expit(-value * minus) * dminus)
    )


def _has_rest_point(value: float, length: int, grid: np.ndarray) -> bool:
    """Whether ``phi_B`` rises somewhere on ``grid`` (a minimum at finite ``u``)."""
    slope = reduced_slope(grid, value, length)
    return bool((slope > 1e-12 * np.abs(slope).max()).any())


def collapse_threshold(
    length: int, *, u_max: float = 40.0, points: int = 40_001, tol: float = 1e-6
) -> float:
    """``B_c(T)``: the smallest value at which ``phi_B`` stops decreasing on ``(0,
    u_max]``, by bisection on ``B`` (slope sampled at ``points`` equally spaced ``u``;
    a rise below ``1e-12`` of the largest slope is rounding)."""
    _check(1.0, length)
    grid = np.linspace(u_max / points, u_max, points)
    lo, hi = 0.0, 1.0
    while not _has_rest_point(hi, length, grid):
        lo, hi = hi, 2.0 * hi
        if hi > 1e6:
            raise RuntimeError("no rest point found up to B = 1e6")
    while hi - lo > tol * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if _has_rest_point(mid, length, grid) else (mid, hi)
    return hi


def reduced_rest_point(value: float, length: int, *, u_max: float = 40.0) -> float:
    """The smallest ``u > 0`` where ``phi_B`` has a local minimum (``inf`` when it
    decreases on all of ``(0, u_max]``): where the reduced flow comes to rest."""
    grid = np.linspace(1e-4, u_max, 400_001)
    slope = reduced_slope(grid, value, length)
    rise = np.flatnonzero(slope > 1e-12 * np.abs(slope).max())
    if rise.size == 0:
        return float("inf")
    k = int(rise[0])
    if k == 0:
        return 0.0
    # the zero of the slope between grid[k-1] (slope <= 0) and grid[k] (slope > 0)
    s0, s1 = slope[k - 1], slope[k]
    return float(grid[k - 1] + (grid[k] - grid[k - 1]) * (-s0) / (s1 - s0))


def rest_point_mass(value: float, length: int) -> float:
    """``pi(-u*)``: the losing class's attention on its important token at the rest
    point ``u*`` (zero below ``B_c(T)``)."""
    rest = reduced_rest_point(value, length)
    if not np.isfinite(rest):
        return 0.0
    return float(_attention(np.float64(-rest), length)[0])


def reduced_flow(
    u0: float, value: float, length: int, speed: float, t_end: float
) -> float:
    """``u(t_end)`` of ``du/dt = -speed phi_B'(u)``, ``u(0) = u0`` (``speed = B^2 /
    ||v||^2`` for the flow on ``p``), by Radau (rtol 1e-10) in ``tau = log(1 + t)``."""
    _check(value, length)
    if not (np.isfinite(t_end) and t_end > 0):
        raise ValueError(f"t_end must be a positive finite number, got {t_end!r}")

    def rhs(tau, u):
        return -np.exp(tau) * speed * reduced_slope(u, value, length)

    sol = solve_ivp(
        rhs,
        (0.0, float(np.log1p(t_end))),
        [float(u0)],
        method="Radau",
        rtol=1e-10,
        atol=1e-12,
    )
    if not sol.success:
        raise RuntimeError(f"reduced_flow: {sol.message}")
    return float(sol.y[0, -1])


# ---- the map
def classify_outcome(important_mass: np.ndarray, labels: np.ndarray) -> str:
    """``"selects"``: every sequence >= 0.99 on its important token; ``"collapses"``:
    every sequence of one class < 0.5; ``"loses part"``: some; else ``"undecided"``."""
    mass, labels = np.asarray(important_mass, dtype=np.float64), np.asarray(labels)
    if mass.min() >= 0.99:
        return "selects"
    lost = mass < 0.5
    if any(lost[labels == y].all() for y in (-1, 1) if (labels == y).any()):
        return "collapses"
    return "loses part" if lost.any() else "undecided"


def decided_outcome(path, labels: np.ndarray, log_t_end: float, settle: float) -> str:
    """:func:`classify_outcome` at ``log t = log_t_end`` if reached with the same
    outcome at ``log_t_end - settle``, else ``"undecided"``."""
    end = float(np.log(path.t[-1])) if path.t[-1] > 0 else -np.inf
    if end < log_t_end - 1e-9:
        return "undecided"
    last = classify_outcome(path.selected_mass[-1], labels)
    with np.errstate(divide="ignore"):
        k = int(np.argmin(np.abs(np.log(path.t) - (log_t_end - settle))))
    same = classify_outcome(path.selected_mass[k], labels) == last
    return last if same else "undecided"


def _run_map(
    instances: Sequence[SelectionData],
    settings: Sequence[dict],
    *,
    seed_offset: int,
    log_t_max: float,
    settle: float,
    log_t_more: float | None,
    **flow,
) -> pd.DataFrame:
    """Every (instance, setting) pair as one batch; undecided runs that reached their
    end go on for ``e^{log_t_more}`` (``stage`` 2)."""
    runs, problems, selected = [], [], []
    for j, inst in enumerate(instances):
        relevant = np.flatnonzero(inst.token_class != 0)
        irrelevant = torch.as_tensor(np.flatnonzero(inst.token_class == 0))
        alpha = average_signed_frequency(inst.counts, inst.labels, inst.vocab_size)
        alpha_star = float(alpha[relevant].abs().min())
        for setting in settings:
            s = one_step_setting(
                inst,
                setting["dim"],
                setting["eta"],
                seed=seed_offset + j,
                embed_scale=setting["embed_scale"],
                cls_scale=setting["cls_scale"],
                device=flow["device"],
            )
            problems.append((s.E1, s.v, inst.counts, inst.labels, s.p0))
            selected.append(inst.important)
            gap = value_gap(s.E1, s.v, inst.counts, inst.labels, inst.important)
            runs.append(
                {
                    "seed": seed_offset + j,
                    **setting,
                    "value": 0.5 * setting["eta"] * alpha_star * float(s.v @ s.v),
                    "p0_dot_v": float(s.p0 @ s.v),
                    "min_value_gap": float(gap.min()),
                    "irrelevant_spread": float((s.E1 @ s.v)[irrelevant].std()),
                    "_v": s.v.cpu().numpy(),
                    "_labels": np.asarray(inst.labels),
                }
            )
    flow.update(on_max_steps="stop")
    paths = batched_gradient_flow(
        problems, log_t_max=log_t_max, selected=selected, **flow
    )
    labels = [run.pop("_labels") for run in runs]
    outcomes = [
        decided_outcome(path, y, log_t_max, settle) for path, y in zip(paths, labels)
    ]
    stage = [1] * len(paths)
    # runs that reached their end undecided go on; those stopped by max_steps do not
    t_end = np.exp(log_t_max)
    again = [
        i
        for i, o in enumerate(outcomes)
        if o == "undecided" and paths[i].t[-1] >= t_end * (1 - 1e-12)
    ]
    if log_t_more is not None and again:
        more = batched_gradient_flow(
            [
                (
                    *problems[i][:4],
                    torch.as_tensor(paths[i].p[-1], device=flow["device"]),
                )
                for i in again
            ],
            log_t_max=log_t_more,
            selected=[selected[i] for i in again],
            **flow,
        )
        for i, path in zip(again, more):
            paths[i], stage[i] = path, 2
            outcomes[i] = decided_outcome(path, labels[i], log_t_more, settle)
    for run, path, outcome, y, st in zip(runs, paths, outcomes, labels, stage):
        signs = set(y[path.selected_mass[-1] < 0.5].tolist())
        run.update(
            outcome=outcome,
            lost_sign=signs.pop() if len(signs) == 1 else 0,
            end_dot_v=float(path.p[-1] @ run.pop("_v")),
            stage=st,
        )
    return pd.DataFrame(runs)


def value_map(
    instances: Sequence[SelectionData],
    grids: Sequence[dict],
    *,
    log_t_max: float = 20.0,
    settle: float = 5.0,
    log_t_more: float | None = 30.0,
    dtau: float = 0.02,
    seed_offset: int = 0,
    max_steps: int = 20_000,
    device: torch.device | str | None = None,
) -> pd.DataFrame:
    """The map over ``B`` and ``r``: every grid (``values``, ``ratios``, ``dims``,
    ``cls_scales``) as a product, one batch per ratio, ``eta = 2 B / |alpha*|``, ``E0``
    scale ``B / r``; one row per run (its setting, measured ``value``, outcome...)."""
    alphas = set()
    for inst in instances:
        alpha = average_signed_frequency(inst.counts, inst.labels, inst.vocab_size)
        alphas.add(round(float(alpha[inst.token_class != 0].abs().min()), 12))
    if len(alphas) != 1:
        raise ValueError("the instances must share |alpha*| (same sizes)")
    (alpha_star,) = alphas
    settings = [
        {
            "eta": 2.0 * float(value) / alpha_star,
            "embed_scale": float(value) / float(ratio),
            "dim": int(dim),
            "cls_scale": float(cls),
            "value_scale": float(value),
            "ratio_scale": float(ratio),
        }
        for grid in grids
        for value in grid["values"]
        for ratio in grid["ratios"]
        for dim in grid["dims"]
        for cls in grid["cls_scales"]
    ]
    tables = [
        _run_map(
            instances,
            [st for st in settings if st["ratio_scale"] == ratio],
            seed_offset=seed_offset,
            log_t_max=log_t_max,
            settle=settle,
            log_t_more=log_t_more,
            dtau=dtau,
            device=device,
            max_steps=max_steps,
        )
        for ratio in sorted({st["ratio_scale"] for st in settings})
    ]
    return pd.concat(tables, ignore_index=True)


def boundary_brackets(runs, values: str = "value"):
    """Per ``ratio_scale`` with both outcomes: the largest collapsing and smallest
    selecting value, their mean ``boundary`` and ``half_width``."""
    rows = []
    for ratio, part in runs.groupby("ratio_scale"):
        lost = part.loc[part["outcome"] == "collapses", values]
        kept = part.loc[part["outcome"] == "selects", values]
        if len(lost) and len(kept):
            lo, hi = float(lost.max()), float(kept.min())
            rows.append(
                {
                    "ratio_scale": ratio,
                    "collapse_max": lo,
                    "select_min": hi,
                    "boundary": 0.5 * (lo + hi),
                    "half_width": 0.5 * abs(hi - lo),
                }
            )
    return pd.DataFrame(rows).set_index("ratio_scale")
