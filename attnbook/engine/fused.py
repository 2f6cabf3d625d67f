"""One sweep over the embeddings per training step: the update of ``E`` with a
rank-``J`` gradient, fused with the passes before and after it.

When the gradient of ``E`` (``V, d``) is ``G @ P`` for a thin ``G`` (``V, J``) and ``P``
(``J, d``) -- as for the one-layer model, where ``P = [p, v]`` -- a training step need
not write that gradient at all. :func:`fused_step` goes over the rows of ``E`` once and,
for each row, forms its gradient ``G[s] @ P`` in registers, adds ``G[s, j] E[s]`` to the
sums ``Q = G.T @ E`` (``E`` before the update: the gradient of ``P``), updates the row
(Adam, with its two moments, or plain gradient descent) and, when asked, takes the
scores ``E[s] @ P.T`` of the updated row. ``E`` and each moment are read once and
written once: a step of a training loop that used separate passes reads ``E`` three
times and writes and reads the gradient besides.

The update is ``torch.optim.Adam``'s (``betas``, ``eps``, no weight decay) or
``torch.optim.SGD``'s without momentum, the same up to rounding. On CPU the sweep runs
as compiled C (``fused_step`` in ``fused_step_typed.h``, built with the other kernels
by :mod:`attnbook.engine.native`); elsewhere as torch operations (its twin).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import torch

from attnbook.engine import kernels
from attnbook.engine.pass_checks import (
    FLOAT_SUFFIX,
    dense_tensor,
    overlap,
    same_kind,
    shape_error,
)

__all__ = [
    "AdamMoments",
    "fused_step",
    "logistic_counts",
]


@dataclass
class AdamMoments:
    """Adam's state of one tensor: the first and second moments (``exp_avg``,
    ``exp_avg_sq``) and the number of steps taken, with the hyperparameters."""

    exp_avg: torch.Tensor
    exp_avg_sq: torch.Tensor
    step: int = 0
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8

    @classmethod
    def zeros_like(
        cls,
        E: torch.Tensor,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> "AdamMoments":
        """Zero moments for ``E``, as ``torch.optim.Adam`` starts them."""
        return cls(torch.zeros_like(E), torch.zeros_like(E), 0, betas, eps)


def _real(name: str, value: object, *, positive: bool = False) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not math.isfinite(value)
        or value < 0
        or (positive and value == 0)
    ):
        kind = "a positive" if positive else "a non-negative"
        raise ValueError(
            f"fused_step: {name} must be {kind} finite number, got {value!r}"
        )
    return float(value)


def fused_step(
    E: torch.Tensor,
    G: torch.Tensor,
    P: torch.Tensor,
    *,
    lr: float,
    moments: AdamMoments | None = None,
    row_sums: bool = True,
    scores: bool = False,
    check_input: bool = True,
) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """Update ``E`` in place with the gradient ``G @ P`` in one sweep; return ``(Q,
    S)``: ``Q = G.T @ E`` with ``E`` before the update (``(J, d)``, ``None`` unless
    ``row_sums``) and ``S = E @ P.T`` after it (``(V, J)``, ``None`` unless
    ``scores``).

    ``moments`` given: one Adam step (its ``step`` is advanced and its moments updated
    in place); ``None``: plain gradient descent ``E -= lr G @ P``. ``E`` (``V, d``) must
    be contiguous; ``G`` (``V, J``), ``P`` (``J, d``) and the moments float32 or float64
    tensors of ``E``'s dtype and device, ``J <= 16``, and the moments contiguous, of
    ``E``'s shape, sharing memory with nothing else. Raises ``TypeError`` or
    ``ValueError`` naming the argument otherwise. ``check_input=False`` skips the
    checks, for a caller that built the arguments itself."""
    if check_input:
        fn = "fused_step"
        for name, t in (("E", E), ("G", G), ("P", P)):
            dense_tensor(fn, name, t)
        same_kind(fn, ("E", E), ("G", G), ("P", P))
        (V, d), J = E.shape, G.shape[1]
        if G.shape[0] != V or not 1 <= J <= kernels.MAX_COLUMNS:
            raise shape_error(fn, "G", G, f"({V}, J) with 1 <= J <= 16")
        if P.shape != (J, d):
            raise shape_error(fn, "P", P, f"({J}, {d})")
        if not E.is_contiguous():
            raise ValueError(f"{fn}: E must be contiguous (it is updated in place)")
        others = [("G", G), ("P", P)]
        if moments is not None:
            if not isinstance(moments, AdamMoments):
                raise TypeError(
                    f"{fn}: moments must be AdamMoments or None, got "
                    f"{type(moments).__name__}"
                )
            b1, b2 = moments.betas
            for name, value in (("beta1", b1), ("beta2", b2)):
                if not 0 <= _real(name, value) < 1:
                    raise ValueError(f"{fn}: {name} must lie in [0, 1), got {value!r}")
            _real("eps", moments.eps)
            if isinstance(moments.step, bool) or not isinstance(moments.step, int):
                raise TypeError(
                    f"{fn}: moments.step must be an int, got {moments.step!r}"
                )
            if moments.step < 0:
                raise ValueError(f"{fn}: moments.step must be >= 0, got {moments.step}")
            for name in ("exp_avg", "exp_avg_sq"):
                t = dense_tensor(fn, f"moments.{name}", getattr(moments, name))
                same_kind(fn, ("E", E), (f"moments.{name}", t))
                if t.shape != E.shape or not t.is_contiguous():
                    raise shape_error(
                        fn, f"moments.{name}", t, f"{tuple(E.shape)}, contiguous"
                    )
                others.append((f"moments.{name}", t))
        _real("lr", lr, positive=True)
        written = [("E", E)] + [o for o in others if o[0].startswith("moments")]
        for i, (name, t) in enumerate(written):
            for other, u in written[i + 1 :] + others[:2]:
                if overlap(t, u):
                    raise ValueError(f"{fn}: {name} shares memory with {other}")
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
    """The twin of the compiled sweep: the same update by torch operations (the
    gradient ``G @ P`` is formed in full)."""
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
    """The forward and backward count products of the one-layer model with the mean
    logistic loss in one pass over the sparse CSR ``A`` (``n, V``): ``(f, den, Z)``
    with ``[den, num] = A @ X`` for ``X = [u, u b]`` (``V, 2``), ``f = num / den`` and
    ``Z = A.T @ [r_D, R]``, ``R = g / den``, ``r_D = -R f``, ``g`` the derivative of the
    mean logistic loss in ``f`` (labels ``y``, -1/+1). ``None`` where the compiled
    kernel does not serve these tensors (the caller then makes the two products). It
    checks nothing: its one caller builds the arguments itself."""
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
