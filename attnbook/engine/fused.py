"""The one-layer model's training step in one sweep over the embeddings.

Its gradient in ``E`` (``V, d``) is ``G @ P`` with ``P = [p, v]`` and ``G`` (``V, 2``)
the gradient in the scores ``E P^T``. :func:`fused_step` goes over the rows of ``E``
once: it forms each row's gradient, sums ``Q = G^T E`` (the gradient of ``P``), updates
the row (``torch.optim.Adam``'s or ``SGD``'s update, up to rounding) and may take the
next scores; compiled C on the CPU (``fused_step_typed.h``), torch operations
elsewhere. :class:`FusedOneLayerStep` makes the learning curves' steps with it.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

import torch

from attnbook.engine import kernels
from attnbook.engine.counts import TokenCounts, check_counts
from attnbook.engine.kernels import vocabulary_shift_gradient
from attnbook.engine.pass_checks import FLOAT_SUFFIX
from attnbook.engine.segments import CANCELLATION_LIMIT, RowTerms
from attnbook.validation import as_signed_labels, check_finite_scores

__all__ = [
    "AdamMoments",
    "FusedOneLayerStep",
    "fused_one_layer_step",
    "fused_step",
    "logistic_counts",
    "loss_and_score_gradient",
    "torch_optimizer",
]

_GROUPS = ("E", "p", "v")


@dataclass
class AdamMoments:
    """Adam's state of one tensor: its two moments, steps taken and hyperparameters."""

    exp_avg: torch.Tensor
    exp_avg_sq: torch.Tensor
    step: int = 0
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8

    @classmethod
    def zeros_like(cls, E: torch.Tensor) -> "AdamMoments":
        """Zero moments for ``E``, as ``torch.optim.Adam`` starts them."""
        return cls(torch.zeros_like(E), torch.zeros_like(E))


def fused_step(
    E: torch.Tensor,
    G: torch.Tensor,
    P: torch.Tensor,
    *,
    lr: float,
    moments: AdamMoments | None = None,
    row_sums: bool = True,
    scores: bool = False,
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """Update ``E`` in place with the gradient ``G @ P`` in one sweep; return ``(Q,
    S)``: ``Q = G.T @ E`` with ``E`` before the update (``None`` unless ``row_sums``)
    and ``S = E @ P.T`` after it (``None`` unless ``scores``). ``moments`` given: an
    Adam step (advancing them); ``None``: ``E -= lr G @ P``. Checks nothing: ``E``
    contiguous, ``J <= 16``, all of ``E``'s dtype and device, no memory shared."""
    step_size = bc2_sqrt = 1.0
    beta1, beta2, eps = 0.0, 0.0, 0.0
    if moments is not None:
        moments.step += 1
        (beta1, beta2), eps = moments.betas, moments.eps
        step_size = lr / (1 - beta1**moments.step)
        bc2_sqrt = math.sqrt(1 - beta2**moments.step)
    tensors = [E, G, P] + (
        [] if moments is None else [moments.exp_avg, moments.exp_avg_sq]
    )
    G, P = G.contiguous(), P.contiguous()
    if not kernels.uses_native(*tensors):
        return _torch_step(E, G, P, lr, moments, row_sums, scores, step_size, bc2_sqrt)
    (V, d), J = E.shape, G.shape[1]
    Q = torch.empty(J, d, dtype=E.dtype) if row_sums else None
    S = torch.empty(V, J, dtype=E.dtype) if scores else None
    m = w = 0
    if moments is not None:
        m, w = moments.exp_avg.data_ptr(), moments.exp_avg_sq.data_ptr()
    fn = getattr(kernels.native_library(), f"fused_step_{FLOAT_SUFFIX[E.dtype]}")
    code = fn(
        E.data_ptr(),
        m or None,
        w or None,
        V,
        d,
        G.data_ptr(),
        P.data_ptr(),
        J,
        None if Q is None else Q.data_ptr(),
        None if S is None else S.data_ptr(),
        float(lr),
        float(beta1),
        float(beta2),
        float(eps),
        float(step_size),
        float(bc2_sqrt),
        kernels.omp_threads(),
    )
    if code == 2:
        raise MemoryError("fused_step: no memory for the per-thread sums")
    kernels.raise_on_status("fused_step", code)
    return Q, S


def _torch_step(
    E: torch.Tensor,
    G: torch.Tensor,
    P: torch.Tensor,
    lr: float,
    moments: AdamMoments | None,
    row_sums: bool,
    scores: bool,
    step_size: float,
    bc2_sqrt: float,
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """The compiled sweep's twin in torch operations (``G @ P`` formed in full)."""
    Q = G.t() @ E if row_sums else None
    grad = G @ P
    if moments is None:
        E.add_(grad, alpha=-lr)
    else:
        b1, b2 = moments.betas
        moments.exp_avg.lerp_(grad, 1 - b1)
        moments.exp_avg_sq.mul_(b2).addcmul_(grad, grad, value=1 - b2)
        denom = (moments.exp_avg_sq.sqrt() / bc2_sqrt).add_(moments.eps)
        E.addcdiv_(moments.exp_avg, denom, value=-step_size)
    S = E @ P.t() if scores else None
    return Q, S


def logistic_counts(
    A: torch.Tensor, X: torch.Tensor, y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """The one-layer model's count products with the mean logistic loss in one pass
    over the CSR ``A`` (``n, V``): ``(f, den, Z)`` with ``[den, num] = A @ X`` for ``X =
    [u, u b]``, ``f = num / den``, ``Z = A.T @ [-R f, R]``, ``R = g / den`` and ``g``
    the loss's derivative in ``f`` (labels ``y``, -1/+1). ``None`` where the compiled
    kernel does not serve these tensors. Checks nothing."""
    indptr, indices, values = A.crow_indices(), A.col_indices(), A.values()
    if not (
        X.shape[1] == 2
        and indptr.dtype == indices.dtype == torch.int32
        and y.dtype == X.dtype == values.dtype
        and kernels.uses_native(values, X, y, indptr, indices)
    ):
        return None
    (n, V), dtype = A.shape, X.dtype
    f, den = torch.empty(n, dtype=dtype), torch.empty(n, dtype=dtype)
    Z = torch.empty(V, 2, dtype=dtype)
    fn = getattr(kernels.native_library(), f"logistic_counts_{FLOAT_SUFFIX[dtype]}")
    code = fn(
        indptr.data_ptr(),
        indices.data_ptr(),
        values.data_ptr(),
        n,
        X.data_ptr(),
        V,
        y.data_ptr(),
        f.data_ptr(),
        den.data_ptr(),
        Z.data_ptr(),
        kernels.omp_threads(),
    )
    if code == 2:
        raise MemoryError("logistic_counts: no memory for the per-thread sums")
    kernels.raise_on_status("logistic_counts", code)
    return f, den, Z


def torch_optimizer(optimizer: str, groups: list[dict]) -> torch.optim.Optimizer:
    """``torch.optim.Adam`` (``"adam"``) or ``SGD`` (``"gd"``) over parameter
    ``groups``, in torch's fused single-kernel form where it has one."""
    kind = torch.optim.SGD if optimizer == "gd" else torch.optim.Adam
    try:
        return kind(groups, lr=groups[0]["lr"], fused=True)
    except (RuntimeError, ValueError):  # device or dtype without a fused kernel
        return kind(groups, lr=groups[0]["lr"])


def loss_and_score_gradient(
    scores: torch.Tensor, PW: torch.Tensor, counts: TokenCounts, y: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The mean logistic loss of the one-layer model and its gradient ``G`` (``V, 2``)
    in the scores ``E [p, v]^T``, by the count engine's formulas without passes over
    ``E`` (``PW = [p, v]``; ``y`` -1/+1)."""
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
        loss = torch.nn.functional.softplus(-y * f).mean()
        G = torch.empty_like(Z)
        torch.mul(u, Z[:, 1], out=G[:, 1])  # G_b
        torch.addcmul(Z[:, 0], B[:, 0], Z[:, 1], out=G[:, 0])
        G[:, 0].mul_(u)  # G_a
        return loss, G
    nd = kernels.csr_times(A, X, check_input=False)
    den, num = nd[:, 0], nd[:, 1:]
    rows = None
    if bool((den >= floor).all()):
        f0 = f = num / den[:, None]
        if accurate:
            rows = RowTerms(a, B, counts)
    else:
        rows = RowTerms(a, B, counts)
        f = rows.f
    f = f.detach().requires_grad_()
    with torch.enable_grad():
        loss = torch.nn.functional.softplus(-y * f[:, 0]).mean()
        (g,) = torch.autograd.grad(loss, f)
    if not torch.isfinite(loss):
        return loss.detach(), g
    if rows is not None:
        return loss.detach(), rows.score_gradient(g, scores.shape[0])
    return loss.detach(), vocabulary_shift_gradient(counts, B, u, den, f0, g)


class FusedOneLayerStep:
    """Full-batch steps of the one-layer model (``params`` ``E``, ``p``, ``v``, updated
    in place) on ``counts`` and -1/+1 ``labels``, each one sweep over ``E``: ``E`` by
    Adam (``optimizer="adam"``) or gradient descent, the other ``trainable`` groups by
    torch's optimizer of that kind; ``lr`` one step size or one per group. Calling it
    with the step number makes a step and returns the loss before it. A change made to
    the parameters between steps is seen (their version counters)."""

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
        E = params["E"]
        rates = lr if isinstance(lr, Mapping) else {g: lr for g in trainable}
        self.params = {g: params[g] for g in _GROUPS}
        self.counts = check_counts(counts, E.shape[0]).to(E.device)
        self.y = as_signed_labels(labels, self.counts.n_sequences, dtype=E.dtype).to(
            E.device
        )
        self.lr = float(rates["E"])
        self.moments = AdamMoments.zeros_like(E) if optimizer == "adam" else None
        self.small = tuple(g for g in ("p", "v") if g in trainable)
        groups = [{"params": [params[g]], "lr": float(rates[g])} for g in self.small]
        self.head_optimizer = torch_optimizer(optimizer, groups) if groups else None
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
    """A :class:`FusedOneLayerStep` where it applies (``E`` trained, a contiguous
    float32 or float64 tensor on the CPU); else, or with ``ATTNBOOK_FUSED=0``,
    ``None``."""
    E = params["E"]
    if (
        os.environ.get("ATTNBOOK_FUSED", "1") == "0"
        or "E" not in trainable
        or E.device.type != "cpu"
        or E.dtype not in (torch.float32, torch.float64)
        or not E.is_contiguous()
    ):
        return None
    return FusedOneLayerStep(
        params, counts, labels, optimizer=optimizer, lr=lr, trainable=trainable
    )
