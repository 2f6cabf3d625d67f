"""Where the flow on ``p`` selects the important tokens: a map over the ratio of the
step's moved part to the random part of the embeddings, the dimension and the start
``p(0)``.

After one step of size ``eta`` from ``E0`` with i.i.d. ``N(0, sigma^2 / d)`` entries, a
relevant embedding is ``E1_s = E0_s + (eta / 2) alpha_s v + ...``: a *moved part* of
norm about ``(eta / 2) |alpha_s| ||v||`` shared by all relevant tokens of a class, and a
*random part* of norm about ``sigma``. Their ratio

    r = ||E1_s - E0_s|| / ||E0_s||   (median over the relevant tokens)

is the parameter of :func:`selection_map`; the small initialization of the one-step
lemma (``sigma -> 0`` at fixed ``eta``) is ``r -> infinity``. Every run is one
:func:`attnbook.theory.flow_batch.batched_gradient_flow` problem; the runs of a map are
one batch.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from attnbook.data.selection import SelectionData
from attnbook.theory.flow_analysis import one_step_setting, value_gap
from attnbook.theory.flow_batch import batched_gradient_flow

__all__ = ["OUTCOMES", "classify_outcome", "step_ratio", "selection_map"]

#: The outcome of a run, from the attention on the important tokens at the end.
OUTCOMES = {
    "selects": "every sequence puts at least 0.99 of its attention on its important "
    "token",
    "collapses": "some sequence puts less than half of its attention on its important "
    "token",
    "undecided": "neither (the run has not settled by the end time)",
}


def classify_outcome(important_mass: np.ndarray) -> str:
    """``"selects"``, ``"collapses"`` or ``"undecided"`` (:data:`OUTCOMES`) from the
    attention mass on the important token of every sequence at the end of a run."""
    mass = np.asarray(important_mass, dtype=np.float64)
    if mass.ndim != 1 or mass.size == 0 or not np.isfinite(mass).all():
        raise ValueError("important_mass must be a non-empty finite 1-D array")
    if mass.min() >= 0.99:
        return "selects"
    if mass.min() < 0.5:
        return "collapses"
    return "undecided"


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
    and classify its end; one pandas DataFrame row per run (``log_t_max`` and ``dtau``
    as in :func:`~attnbook.theory.flow_batch.batched_gradient_flow`).

    Instance ``j`` (data satisfying Assumption 1, with ``.important``) is paired with
    the initialization seed ``seed_offset + j`` at every scale and dimension, so that
    along a row of the map only the scale changes (the draws are made at unit scale,
    see :func:`attnbook.theory.flow_analysis.one_step_setting`). Columns: ``seed``,
    ``embed_scale``, ``ratio`` (:func:`step_ratio` over the relevant tokens), ``dim``,
    ``cls_scale``, ``p0_norm``, ``p0_dot_v``, ``min_value_gap``, ``outcome``
    (:func:`classify_outcome`), ``fraction_lost`` (sequences below half), ``lost_sign``
    (the label of the lost sequences: +1, -1, or 0 when none or both are lost),
    ``end_dot_v`` (``p(t_end) . v``), ``min_mass`` and ``end_norm``.
    """
    import pandas as pd

    runs, problems, selected = [], [], []
    for j, inst in enumerate(instances):
        relevant = np.flatnonzero(inst.token_class != 0)
        for scale in embed_scales:
            for dim in dims:
                for cls in cls_scales:
                    s = one_step_setting(
                        inst,
                        int(dim),
                        eta,
                        seed=seed_offset + j,
                        embed_scale=float(scale),
                        cls_scale=float(cls),
                        device=device,
                    )
                    problems.append((s.E1, s.v, inst.counts, inst.labels, s.p0))
                    selected.append(inst.important)
                    runs.append(
                        {
                            "seed": seed_offset + j,
                            "embed_scale": float(scale),
                            "ratio": step_ratio(s.E0, s.E1, relevant),
                            "dim": int(dim),
                            "cls_scale": float(cls),
                            "p0_norm": float(s.p0.norm()),
                            "p0_dot_v": float(s.p0 @ s.v),
                            "min_value_gap": float(
                                value_gap(
                                    s.E1, s.v, inst.counts, inst.labels, inst.important
                                ).min()
                            ),
                            "_v": s.v.cpu().numpy(),
                            "_labels": np.asarray(inst.labels),
                        }
                    )
    paths = batched_gradient_flow(
        problems,
        log_t_max=log_t_max,
        dtau=dtau,
        selected=selected,
        device=device,
        check_every=check_every,
    )
    for run, path in zip(runs, paths):
        mass = path.selected_mass[-1]
        lost = mass < 0.5
        labels = run.pop("_labels")
        signs = set(labels[lost].tolist())
        run.update(
            outcome=classify_outcome(mass),
            fraction_lost=float(lost.mean()),
            lost_sign=signs.pop() if len(signs) == 1 else 0,
            end_dot_v=float(path.p[-1] @ run.pop("_v")),
            min_mass=float(mass.min()),
            end_norm=float(np.linalg.norm(path.p[-1])),
            steps=path.steps,
            rejected=path.rejected,
        )
    return pd.DataFrame(runs)
