"""Gradient flow on the ``<cls>`` vector ``p`` with the embeddings ``E`` and the head
``v`` frozen: one problem.

:func:`gradient_flow` integrates ``dp/dt = -grad L(p)`` for one problem; it is the
batch of one of the integrator :func:`attnbook.theory.flow_batch.batched_gradient_flow`
(Euler steps in logarithmic time, stable at any ``||p||``: see that module), recorded
at log-spaced times. :func:`flow_state` and :func:`loss_change` give the loss, its
gradient and the change of the loss between two points by the integrator's own
formulas. The problem's data and the recorded path are those of
:mod:`attnbook.theory.flow_problem` (:class:`FlowProblem`, :class:`FlowPath`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attnbook.theory.flow_batch import FlowBatch, batched_gradient_flow
from attnbook.theory.flow_problem import (
    ROUNDING_FLOOR,
    FlowPath,
    FlowProblem,
    default_t0,
    direction_cosines,
    finite_number,
)

__all__ = [
    "FlowProblem",
    "FlowState",
    "FlowPath",
    "gradient_flow",
    "flow_state",
    "loss_change",
    "default_t0",
    "finite_number",
    "ROUNDING_FLOOR",
    "direction_cosines",
]


@dataclass
class FlowState:
    """Loss, gradient, outputs and attention of a problem at one ``p`` (float64)."""

    p: torch.Tensor
    loss: float
    grad: torch.Tensor  # (d,)
    f: torch.Tensor  # (n,) outputs
    attention: torch.Tensor  # (nnz,) attention mass of every stored entry


def _batch_of_one(problem: FlowProblem, p: torch.Tensor) -> FlowBatch:
    p = p.detach().to(device=problem.device, dtype=torch.float64)
    return FlowBatch([problem], [p], [None], [None], problem.device)


def flow_state(problem: FlowProblem, p: torch.Tensor) -> FlowState:
    """Loss, gradient, outputs and attention of ``problem`` at ``p``, computed as the
    integrator computes them (stable at any ``||p||``)."""
    batch = _batch_of_one(problem, p)
    st = batch.state(
        torch.zeros(1, batch.k, dtype=torch.float64, device=batch.R.device)
    )
    rows, pos = problem.rows, problem.positions()
    return FlowState(
        p=p,
        loss=float(st["loss"][0]),
        grad=batch.Q[0] @ st["grad"][0],
        f=st["f"][0, : problem.n],
        attention=st["pi"][0][rows, pos],
    )


def loss_change(problem: FlowProblem, p: torch.Tensor, p_new: torch.Tensor) -> float:
    """``L(p_new) - L(p)``, written relative to the top-scoring tokens as the
    integrator's acceptance test computes it (accurate when ``L`` no longer changes in
    its 16th digit)."""
    old, new = (_batch_of_one(problem, q) for q in (p, p_new))
    zero = torch.zeros(1, old.k, dtype=torch.float64, device=old.R.device)
    change, _ = old.loss_change(old.state(zero), new.state(zero))
    return float(change[0]) / problem.n


def gradient_flow(
    E: torch.Tensor,
    v: torch.Tensor,
    sequences: object,
    labels: object,
    p0: torch.Tensor,
    *,
    log_t_max: float = 40.0,
    dtau: float = 0.02,
    t0: float | None = None,
    n_checkpoints: int = 120,
    selected: object | None = None,
    direction: torch.Tensor | None = None,
    max_steps: int = 200_000,
    grow_after: int = 50,
) -> FlowPath:
    """Integrate ``dp/dt = -grad L(p)`` from ``p(0) = p0`` until ``t = e^{log_t_max}``:
    :func:`~attnbook.theory.flow_batch.batched_gradient_flow` of the one problem.

    Euler steps in logarithmic time ``tau = log(1 + t/t0)``: step size ``h = dtau (t0
    + t)``, halving ``dtau`` whenever a step would increase the loss and doubling it
    again (up to its initial value) after ``grow_after`` accepted steps in a row.
    ``t0`` defaults to a value that makes the first step safe for the smoothness of
    ``L``. Checkpoints are recorded at ``t = 0``, at the first step at or after each of
    ``n_checkpoints`` times log-spaced between ``t0`` and ``e^{log_t_max}``, and at the
    end. ``selected`` (one token id or a collection per sequence), when given, makes
    the path record the attention mass on those tokens; ``direction``, when given,
    records ``-grad L . direction / (||grad L|| ||direction||)`` at every checkpoint
    (the alignment of the flow's velocity with that direction). After ``max_steps``
    steps (accepted and rejected) it raises a ``RuntimeError``. Deterministic; runs on
    ``E``'s device in float64.
    """
    if not isinstance(p0, torch.Tensor):
        raise ValueError(f"p0 must be a torch tensor, got {type(p0).__name__}")
    (path,) = batched_gradient_flow(
        [(E, v, sequences, labels, p0)],
        log_t_max=log_t_max,
        dtau=dtau,
        t0=[t0],
        n_checkpoints=n_checkpoints,
        selected=[selected],
        directions=[direction],
        max_steps=max_steps,
        grow_after=grow_after,
    )
    return path
