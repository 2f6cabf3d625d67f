"""Where the flow on ``p`` selects the important tokens after one step: maps over the
ratio ``r`` of the step's moved part to the random part of the relevant embeddings
(:func:`selection_map`) or over the value ``B`` the step gives them and ``r``
(:func:`value_map`), the dimension and ``p(0)``, and the boundary between the outcomes
(:func:`boundary_brackets`, :func:`fit_ratio_constant`, :func:`governing_quantity`)."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from attnbook.data.selection import SelectionData
from attnbook.theory.flow import batched_gradient_flow
from attnbook.theory.flow_analysis import one_step_setting, value_gap
from attnbook.theory.frequency import average_signed_frequency

__all__ = [
    "OUTCOMES",
    "classify_outcome",
    "decided_outcome",
    "step_ratio",
    "selection_map",
    "value_map",
    "boundary_brackets",
    "fit_ratio_constant",
    "governing_quantity",
    "value_at",
    "ratio_constants",
]

#: The outcome of a run, from the attention on the important tokens at the end
#: (a sequence *loses* its important token when less than half of its attention is
#: on it).
OUTCOMES = {
    "selects": "every sequence puts at least 0.99 of its attention on its important "
    "token",
    "collapses": "every sequence of one class loses its important token: the flow "
    "abandons that class",
    "loses part": "some sequences lose their important token, but no class loses all "
    "of its sequences",
    "undecided": "neither (the run has not settled by the end time)",
}


def classify_outcome(important_mass: np.ndarray, labels: np.ndarray) -> str:
    """The outcome of :data:`OUTCOMES` from the attention mass on the important token of
    every sequence at the end of a run and the sequences' +-1 labels."""
    mass = np.asarray(important_mass, dtype=np.float64)
    if mass.ndim != 1 or mass.size == 0 or not np.isfinite(mass).all():
        raise ValueError("important_mass must be a non-empty finite 1-D array")
    labels = np.asarray(labels)
    if labels.shape != mass.shape or not np.isin(labels, (-1, 1)).all():
        raise ValueError("labels must be +-1, one per sequence of important_mass")
    if mass.min() >= 0.99:
        return "selects"
    lost = mass < 0.5
    if any(lost[labels == y].all() for y in (-1, 1) if (labels == y).any()):
        return "collapses"
    return "loses part" if lost.any() else "undecided"


def step_ratio(E0: torch.Tensor, E1: torch.Tensor, tokens: np.ndarray) -> float:
    """Median over ``tokens`` of ``||E1_s - E0_s|| / ||E0_s||`` (``inf`` when ``E0``
    is zero)."""
    idx = torch.as_tensor(np.asarray(tokens), dtype=torch.int64, device=E0.device)
    moved = (E1[idx] - E0[idx]).norm(dim=1)
    random = E0[idx].norm(dim=1)
    if not bool((random > 0).all()):
        return float("inf")
    return float(torch.median(moved / random))


def selection_map(
    instances: Sequence[SelectionData],
    *,
    embed_scales: Sequence[float],
    dims: Sequence[int],
    cls_scales: Sequence[float],
    eta: float,
    log_t_max: float = 25.0,
    dtau: float = 0.02,
    seed_offset: int = 0,
    device: torch.device | str | None = None,
    check_every: int = 25,
):
    """Integrate the flow for every (instance, ``embed_scale``, ``dim``, ``cls_scale``)
    and classify its end; one DataFrame row per run (columns: see :func:`_run_map`).
    Instance ``j`` is paired with the initialization seed ``seed_offset + j`` at every
    setting, so that along a row of the map only the scale changes."""
    settings = [
        {
            "eta": float(eta),
            "embed_scale": float(scale),
            "dim": int(dim),
            "cls_scale": float(cls),
        }
        for scale in embed_scales
        for dim in dims
        for cls in cls_scales
    ]
    return _run_map(
        instances,
        settings,
        seed_offset=seed_offset,
        log_t_max=log_t_max,
        dtau=dtau,
        device=device,
        check_every=check_every,
    )


def _outcome_at(path, labels: np.ndarray, log_t: float) -> str:
    """:func:`classify_outcome` at the checkpoint of ``path`` nearest ``log t``."""
    with np.errstate(divide="ignore"):
        k = int(np.argmin(np.abs(np.log(path.t) - log_t)))
    return classify_outcome(path.selected_mass[k], labels)


def decided_outcome(path, labels: np.ndarray, log_t_end: float, settle: float) -> str:
    """:func:`classify_outcome` at the end ``log t = log_t_end`` if the run reached it
    with the same outcome at ``log_t_end - settle``; ``"undecided"`` otherwise."""
    end = float(np.log(path.t[-1])) if path.t[-1] > 0 else -np.inf
    if end < log_t_end - 1e-9:
        return "undecided"
    last = classify_outcome(path.selected_mass[-1], labels)
    same = _outcome_at(path, labels, log_t_end - settle) == last
    return last if same else "undecided"


def _run_map(
    instances: Sequence[SelectionData],
    settings: Sequence[dict],
    *,
    seed_offset: int,
    log_t_max: float,
    dtau: float,
    device,
    check_every: int,
    settle: float | None = None,
    log_t_more: float | None = None,
    max_steps: int = 200_000,
):
    """Every (instance, setting) pair as one batch; one row per run: the setting, the
    step's ``ratio`` (:func:`step_ratio`) and ``value``, ``p0_norm``, ``p0_dot_v``,
    ``min_value_gap``, ``irrelevant_spread``, ``outcome``, ``fraction_lost``,
    ``class_lost``, ``lost_sign``, ``end_dot_v``, ``min_mass``, ``end_norm``,
    ``steps``, ``rejected`` (and ``stage``). With ``settle`` the outcome is
    :func:`decided_outcome`, and undecided runs that reached their end go on for
    ``e^{log_t_more}`` from there."""
    import pandas as pd

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
                device=device,
            )
            problems.append((s.E1, s.v, inst.counts, inst.labels, s.p0))
            selected.append(inst.important)
            runs.append(
                {
                    "seed": seed_offset + j,
                    **setting,
                    "ratio": step_ratio(s.E0, s.E1, relevant),
                    "value": 0.5 * setting["eta"] * alpha_star * float(s.v @ s.v),
                    "p0_norm": float(s.p0.norm()),
                    "p0_dot_v": float(s.p0 @ s.v),
                    "min_value_gap": float(
                        value_gap(
                            s.E1, s.v, inst.counts, inst.labels, inst.important
                        ).min()
                    ),
                    "irrelevant_spread": float((s.E1 @ s.v)[irrelevant].std()),
                    "_v": s.v.cpu().numpy(),
                    "_labels": np.asarray(inst.labels),
                }
            )
    stop = "raise" if settle is None else "stop"
    flow = dict(
        dtau=dtau,
        device=device,
        check_every=check_every,
        max_steps=max_steps,
        on_max_steps=stop,
    )
    paths = batched_gradient_flow(
        problems, log_t_max=log_t_max, selected=selected, **flow
    )
    labels = [run["_labels"] for run in runs]
    if settle is None:
        outcomes = [
            classify_outcome(path.selected_mass[-1], y)
            for path, y in zip(paths, labels)
        ]
    else:
        outcomes = [
            decided_outcome(path, y, log_t_max, settle)
            for path, y in zip(paths, labels)
        ]
    stage = [1] * len(paths)
    # runs that reached their end undecided go on; those stopped by max_steps do not
    t_end = np.exp(log_t_max)
    again = [
        i
        for i, o in enumerate(outcomes)
        if o == "undecided" and paths[i].t[-1] >= t_end * (1 - 1e-12)
    ]
    if settle is not None and log_t_more is not None and again:
        more = batched_gradient_flow(
            [
                (*problems[i][:4], torch.as_tensor(paths[i].p[-1], device=device))
                for i in again
            ],
            log_t_max=log_t_more,
            selected=[selected[i] for i in again],
            **flow,
        )
        for i, path in zip(again, more):
            paths[i], outcomes[i], stage[i] = (
                path,
                decided_outcome(path, labels[i], log_t_more, settle),
                2,
            )
    for run, path, outcome, st in zip(runs, paths, outcomes, stage):
        mass = path.selected_mass[-1]
        lost = mass < 0.5
        labels = run.pop("_labels")
        signs = set(labels[lost].tolist())
        run.update(
            outcome=outcome,
            fraction_lost=float(lost.mean()),
            class_lost=max(float(lost[labels == y].mean()) for y in (-1, 1)),
            lost_sign=signs.pop() if len(signs) == 1 else 0,
            end_dot_v=float(path.p[-1] @ run.pop("_v")),
            min_mass=float(mass.min()),
            end_norm=float(np.linalg.norm(path.p[-1])),
            steps=path.steps,
            rejected=path.rejected,
        )
        if settle is not None:
            run["stage"] = st
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
    check_every: int = 25,
):
    """The map over the value ``B`` and the ratio ``r``: every grid (dict of ``values``,
    ``ratios``, ``dims``, ``cls_scales``) is run as a product, one batch per ratio, with
    step size ``eta = 2 B / |alpha*|`` and ``E0`` scale ``B / r`` (the moved part of a
    relevant embedding is then about ``B``; column ``value`` is ``(eta / 2) |alpha*|
    ||v||^2``). Outcomes by :func:`decided_outcome`; columns of :func:`_run_map` plus
    ``eta``, ``value_scale``, ``ratio_scale``."""
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
    import pandas as pd

    tables = []
    for ratio in sorted({st["ratio_scale"] for st in settings}):
        tables.append(
            _run_map(
                instances,
                [st for st in settings if st["ratio_scale"] == ratio],
                seed_offset=seed_offset,
                log_t_max=log_t_max,
                dtau=dtau,
                device=device,
                check_every=check_every,
                settle=settle,
                log_t_more=log_t_more,
                max_steps=max_steps,
            )
        )
    return pd.concat(tables, ignore_index=True)


def boundary_brackets(runs, values: str = "value"):
    """Per ``ratio_scale``, the largest value of a run that collapses and the smallest
    of one that selects: ``collapse_max``, ``select_min``, ``boundary`` (their mean)
    and ``half_width``; only ratios with both outcomes."""
    import pandas as pd

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


def fit_ratio_constant(brackets, threshold: float) -> float:
    """The least-squares ``c`` in ``boundary(r) = threshold (1 - c / r)`` over the rows
    of :func:`boundary_brackets`."""
    if len(brackets) == 0:
        raise ValueError("no ratio with both outcomes")
    x = threshold / brackets.index.to_numpy(dtype=float)
    y = threshold - brackets["boundary"].to_numpy(dtype=float)
    return float((x * y).sum() / (x * x).sum())


def governing_quantity(value, ratio, threshold: float, c: float):
    """``Q = value / threshold + c / ratio``: the flow selects when ``Q > 1`` and
    collapses when ``Q < 1`` (the book's conjecture; ``threshold`` is ``B_c(T)``)."""
    return np.asarray(value, dtype=float) / threshold + c / np.asarray(ratio, float)


def value_at(quantity, ratio, threshold: float, c: float):
    """The value at which :func:`governing_quantity` equals ``quantity`` at ``ratio``:
    ``threshold (quantity - c / ratio)`` (where to place runs at a chosen ``Q``)."""
    ratio = np.asarray(ratio, dtype=float)
    if not (ratio > 0).all():
        raise ValueError("ratio must be positive")
    return threshold * (np.asarray(quantity, dtype=float) - c / ratio)


def ratio_constants(brackets, threshold: float):
    """Per ratio ``r`` of :func:`boundary_brackets`, ``c_r = r (1 - boundary /
    threshold)`` (the boundary at ``threshold (1 - c / r)``) and its half-width."""
    if not (np.isfinite(threshold) and threshold > 0):
        raise ValueError(f"threshold must be a positive number, got {threshold!r}")
    r = brackets.index.to_numpy(dtype=float)
    out = brackets[[]].copy()
    out["c_r"] = r * (1.0 - brackets["boundary"].to_numpy(dtype=float) / threshold)
    out["c_half_width"] = r * brackets["half_width"].to_numpy(dtype=float) / threshold
    return out
