"""Training steps of the one-layer model that go over the embeddings once.

A step of :func:`attnbook.models.training.training_step` on the one-layer model makes
five passes over the ``(V, d)`` table ``E`` (the scores ``E [p, v]``, the gradient's
write, ``E^T G``, and the optimizer reading ``E``, its gradient and its moments). Its
gradient in ``E`` is the rank-two ``G [p, v]`` with ``G = [G_a, G_b]`` ``(V, 2)`` the
gradient in the scores, so :class:`FusedOneLayerStep` makes a step from

1. from the scores ``S = E [p, v]^T`` of the current parameters (kept from the step
   before), one pass over the counts gives the loss and ``G`` (both count products of
   the engine, row by row: :func:`attnbook.engine.fused.logistic_counts`);
2. one sweep over ``E`` (:func:`attnbook.engine.fused.fused_step`) forms each row's
   gradient, sums ``G^T E`` (the gradients of ``p`` and ``v``), updates the row (Adam or
   gradient descent) and, when ``p`` and ``v`` stay fixed, takes the next step's scores;
3. ``p`` and ``v`` are updated by the torch optimizer; when they moved, one read of
   ``E`` gives the next scores.

The result is the step of ``torch.optim.Adam`` (or ``SGD``) on the engine's gradient up
to rounding. :func:`fused_one_layer_step` returns such a step where it applies (``E``
trained, on the CPU) and ``None`` elsewhere, where the caller keeps its own step.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from types import SimpleNamespace

import torch

from attnbook.engine import kernels
from attnbook.engine.counts import TokenCounts, check_counts
from attnbook.engine.fused import (
    AdamMoments,
    fused_step,
    logistic_counts,
)
from attnbook.models.count_engine import (
    CANCELLATION_LIMIT,
    RowTerms,
    vocabulary_shift_gradient,
)
from attnbook.models.losses import logistic_loss
from attnbook.validation import (
    as_signed_labels,
    check_finite_scores,
    check_parameters,
)

__all__ = ["FusedOneLayerStep", "fused_one_layer_step", "loss_and_score_gradient"]

_GROUPS = ("E", "p", "v")


def loss_and_score_gradient(
    scores: torch.Tensor, PW: torch.Tensor, counts: TokenCounts, y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The logistic loss of the one-layer model and its gradient ``G`` ``(V, 2)`` in
    the scores ``[a, b] = E [p, v]^T`` (``scores``, ``(V, 2)``), by the count engine's
    formulas (forward and backward in one pass over the counts where the compiled
    kernel serves them and the vocabulary shift holds; else its two sparse products, as
    :func:`attnbook.models.count_engine.count_heads_output` and its backward, without
    the passes over ``E``). ``PW`` is ``[p, v]`` ``(2, d)``; ``y`` the -1/+1 labels."""
    dtype = scores.dtype
    a, B = scores[:, 0], scores[:, 1:]
    u = torch.exp(a - a.max())
    X = torch.cat((u[:, None], u[:, None] * B), dim=1)
    A, _ = counts.sparse_matrices(dtype)
    floor = counts.float_lengths(dtype) * torch.finfo(dtype).tiny ** 0.5
    norms = torch.linalg.vector_norm(PW, dim=1)  # ||p||, ||v||
    b_min, b_max, p_norm, v_norm = torch.cat((torch.stack(torch.aminmax(B)), norms))
    rho = float(p_norm * torch.maximum(b_min.abs(), b_max.abs()))
    accurate = not rho <= CANCELLATION_LIMIT * float(v_norm)
    one_pass = None if accurate else logistic_counts(A, X, y)
    if one_pass is not None and bool((one_pass[1] >= floor).all()):
        f, _, Z = one_pass  # forward and backward in one pass over the counts
        loss = logistic_loss(f, y)
        G = torch.empty_like(Z)
        torch.mul(u, Z[:, 1], out=G[:, 1])  # G_b
        torch.addcmul(Z[:, 0], B[:, 0], Z[:, 1], out=G[:, 0])
        G[:, 0].mul_(u)  # G_a
        return loss.detach(), G
    nd = kernels.csr_times(A, X, check_input=False)
    den, num = nd[:, 0], nd[:, 1:]
    covered = bool((den >= floor).all())
    state = SimpleNamespace(counts=counts)
    rows = None
    if covered:
        f = num / den[:, None]
        state.saved_tensors = (None, PW, a, B, u, den, f)
        if accurate:
            rows = RowTerms(a, B, counts)  # the row-shift backward (module docstring)
    else:
        rows = RowTerms(a, B, counts)
        f = rows.f
    f = f.detach().requires_grad_()
    with torch.enable_grad():
        loss = logistic_loss(f[:, 0], y)
        (g,) = torch.autograd.grad(loss, f)
    if not torch.isfinite(loss):
        return loss.detach(), g
    if rows is not None:
        G = rows.score_gradient(g, scores.shape[0])
    else:
        G = vocabulary_shift_gradient(state, g)
    return loss.detach(), G


class FusedOneLayerStep:
    """Full-batch steps of the one-layer model (``params`` with ``E``, ``p``, ``v``)
    on ``counts`` and the -1/+1 ``labels``, each one sweep over ``E``; calling it with
    the step number makes one step and returns the loss before it (detached).

    ``optimizer`` is ``"adam"`` (``torch.optim.Adam``, default betas and eps) or
    ``"gd"`` (plain gradient descent); ``lr`` one step size or one per trained group
    (``E``, ``p``, ``v``); ``trainable`` names the trained groups and must hold ``E``.
    ``p`` and ``v`` are updated by a torch optimizer of that kind. Parameters are
    updated in place; a change made to them between steps from outside is seen (their
    version counters and addresses), and the scores are then taken afresh.
    """

    def __init__(
        self,
        params: Mapping[str, torch.Tensor],
        counts: TokenCounts,
        labels: torch.Tensor,
        *,
        optimizer: str = "adam",
        lr: float | Mapping[str, float],
        trainable: tuple[str, ...] = _GROUPS,
    ):
        E, p, v = params["E"], params["p"], params["v"]
        check_parameters(E, p, v)
        if optimizer not in ("adam", "gd"):
            raise ValueError(f"optimizer must be 'adam' or 'gd', got {optimizer!r}")
        if "E" not in trainable or set(trainable) - set(_GROUPS):
            raise ValueError(
                f"trainable must hold 'E' and name groups among {_GROUPS}, got "
                f"{trainable!r}"
            )
        rates = {g: lr for g in trainable} if not isinstance(lr, Mapping) else lr
        missing = [g for g in trainable if g not in rates]
        if missing:
            raise ValueError(f"no step size for the trained groups {missing}")
        if not E.is_contiguous():
            raise ValueError("E must be contiguous (the step updates it in place)")
        self.params = {"E": E, "p": p, "v": v}
        self.counts = check_counts(counts, E.shape[0]).to(E.device)
        self.y = as_signed_labels(labels, self.counts.n_sequences, dtype=E.dtype).to(
            E.device
        )
        self.lr = float(rates["E"])
        self.moments = AdamMoments.zeros_like(E) if optimizer == "adam" else None
        self.small = tuple(g for g in ("p", "v") if g in trainable)
        self.head_optimizer = None
        if self.small:
            groups = [
                {"params": [params[g]], "lr": float(rates[g])} for g in self.small
            ]
            kind = torch.optim.SGD if optimizer == "gd" else torch.optim.Adam
            try:
                self.head_optimizer = kind(groups, lr=groups[0]["lr"], fused=True)
            except (RuntimeError, ValueError):
                self.head_optimizer = kind(groups, lr=groups[0]["lr"])
        self._scores: torch.Tensor | None = None
        self._stamp: tuple | None = None

    def _state(self) -> tuple:
        return tuple((t.data_ptr(), t._version) for t in self.params.values())

    def __call__(self, step: int) -> torch.Tensor:
        E, p, v = self.params["E"], self.params["p"], self.params["v"]
        with torch.no_grad():
            PW = torch.stack((p, v))
            if self._scores is None or self._stamp != self._state():
                self._scores = kernels.scores(E, PW, check_input=False)
            scores, self._scores = self._scores, None
            if not bool(torch.isfinite(scores).all()):
                check_finite_scores(scores, E=E, p=p, W=v[:, None])
            loss, G = loss_and_score_gradient(scores, PW, self.counts, self.y)
            if not torch.isfinite(loss):
                raise FloatingPointError(f"loss became {loss.item()} at step {step}")
            Q, S = fused_step(
                E,
                G,
                PW,
                lr=self.lr,
                moments=self.moments,
                row_sums=bool(self.small),
                scores=not self.small,
                check_input=False,
            )
        if self.head_optimizer is not None:
            self.head_optimizer.zero_grad(set_to_none=True)
            for j, g in enumerate(("p", "v")):
                if g in self.small:
                    self.params[g].grad = Q[j].clone()
            self.head_optimizer.step()
            with torch.no_grad():
                S = kernels.scores(E, torch.stack((p, v)), check_input=False)
        self._scores = S
        self._stamp = self._state()
        return loss


def fused_one_layer_step(
    params: Mapping[str, torch.Tensor],
    counts: TokenCounts,
    labels: torch.Tensor,
    *,
    optimizer: str,
    lr: float | Mapping[str, float],
    trainable: tuple[str, ...],
) -> FusedOneLayerStep | None:
    """A :class:`FusedOneLayerStep` where it applies: ``E`` trained, ``E``, ``p``, ``v``
    float32 or float64 leaf tensors on the CPU and ``E`` contiguous; else ``None``
    (also when ``ATTNBOOK_FUSED=0`` is set)."""
    E = params.get("E")
    if (
        os.environ.get("ATTNBOOK_FUSED", "1") == "0"
        or "E" not in trainable
        or optimizer not in ("adam", "gd")
        or set(trainable) - set(_GROUPS)
        or not isinstance(E, torch.Tensor)
        or E.device.type != "cpu"
        or E.dtype not in (torch.float32, torch.float64)
        or not E.is_contiguous()
    ):
        return None
    return FusedOneLayerStep(
        params, counts, labels, optimizer=optimizer, lr=lr, trainable=trainable
    )
