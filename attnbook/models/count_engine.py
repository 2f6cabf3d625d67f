"""The count engine of the attention models: outputs of every head and their gradients.

For ``K`` heads (the columns of ``W``, ``(d, K)``; the binary model has ``K = 1``, ``W =
v``) and a corpus of token counts ``A`` (``(n, V)``), with the scores ``a = E p`` and
``B = E W`` (one fused pass ``E @ [p, W]``),

    f_ik = sum_s pi_is B_sk,    pi_is = A_is exp(a_s) / sum_t A_it exp(a_t).

Two ways to compute it, chosen per call:

- **vocabulary shift** (fast): ``u = exp(a - max_s a_s)``, then one sparse product ``A @
  [u, u * B]`` gives the normaliser and the numerators of every row. Exact by shift
  invariance; accurate as long as no row's mass underflows, which is checked (``den_i >=
  T_i sqrt(tiny)``).
- **row shift**: every row relative to its own top-scoring token ``r_i``: ``pi`` from
  ``exp(a_s - a_{r_i})`` and

      f_i - B_{r_i} = sum_s pi_is (B_s - B_{r_i}),
      d f_i / d a_s = pi_is ((B_s - B_{r_i}) - (f_i - B_{r_i})),

  as in :mod:`attnbook.theory.flow`. Once attention is one-hot the derivative in ``a``
  is exponentially small; written this way it keeps full relative precision, while ``B_s
  - f_i`` formed from ``f_i`` itself is rounding error of order ``eps |B|``, which the
  gradient of ``E`` multiplies by ``||p||``.

The vocabulary shift's backward forms ``pi (B - f)`` as a difference of two products
(two sparse products per gradient, no per-entry work). Its rounding error relative to
the gradient's scale is at most about ``eps ||p|| max|B| / min_k ||W_k||``; when that
ratio exceeds :data:`CANCELLATION_LIMIT` the backward uses the row-shift formula
instead. The five passes over memory (the scores, the two count products, the write of
``dE`` and ``E^T [G_a, G_B]``) are those of :mod:`attnbook.engine.kernels`, called in
their unchecked form: :func:`count_heads_output` has checked everything they rely on.

:func:`count_heads_output` is the entry point. It checks shapes, dtypes, devices and the
vocabulary of the counts once (:func:`check_heads_arguments`), before any compiled pass
runs; the other entry points check their own arguments and call it with
``check_input=False``. Non-finite values are found from the scores
the forward pass computes anyway (a NaN or infinity in ``E`` makes its row's score
non-finite), so that the check costs no extra pass over ``E``.
"""

from __future__ import annotations

import math

import torch
from torch.autograd.function import once_differentiable

from attnbook.engine import kernels
from attnbook.engine.counts import TokenCounts, check_counts
from attnbook.engine.memory import gradient_buffer
from attnbook.engine.segments import row_shift
from attnbook.validation import (
    check_finite_scores,
    check_head_matrix,
    check_parameters,
)

__all__ = [
    "CANCELLATION_LIMIT",
    "RowTerms",
    "check_heads_arguments",
    "count_heads_output",
    "row_terms",
    "vocabulary_shift_gradient",
]

#: Largest ``||p|| max|B| / min_k ||W_k||`` for which the vocabulary-shift backward
#: is used: its error relative to the gradient's scale stays below about 1000 ``eps``.
CANCELLATION_LIMIT = 512.0


class RowTerms:
    """The row-shift quantities of every stored entry ``k`` (row ``rows[k]``, token
    ``tokens[k]``): attention mass ``pi`` (nnz,), ``db = B_s - B_{r_i}`` (nnz, K),
    ``gap = f_i - B_{r_i}`` (n, K), the reference token ``ref`` (n,) of each row, the
    outputs ``f`` (n, K) and the value scores ``B`` (V, K) themselves."""

    def __init__(self, a: torch.Tensor, B: torch.Tensor, counts: TokenCounts):
        tok, rows, n = counts.token_ids, counts.row_ids, counts.n_sequences
        a_tok = a[tok]
        shift, e = row_shift(a_tok, rows, n)
        top = a_tok == shift[rows]
        # the largest id among tied top tokens: any tied token would do, this one is
        # deterministic
        self.ref = torch.zeros(n, dtype=torch.int64, device=a.device).scatter_reduce(
            0, rows[top], tok[top], reduce="amax", include_self=False
        )
        w = counts.float_counts(a.dtype) * e
        den = torch.zeros(n, dtype=a.dtype, device=a.device).index_add_(0, rows, w)
        self.pi = w / den[rows]
        self.db = B[tok] - B[self.ref][rows]
        self.gap = torch.zeros(
            n, B.shape[1], dtype=a.dtype, device=a.device
        ).index_add_(0, rows, self.pi[:, None] * self.db)
        self.rows, self.tokens, self.B = rows, tok, B
        self.f = B[self.ref] + self.gap

    def score_gradient(self, g: torch.Tensor, vocab_size: int) -> torch.Tensor:
        """``(V, 1 + K)``: the gradient of ``sum_ik g_ik f_ik`` in the scores ``a``
        (column 0) and ``B`` (columns 1..K), from ``g`` (n, K)."""
        c_B = self.pi[:, None] * g[self.rows]
        c_a = (c_B * (self.db - self.gap[self.rows])).sum(dim=1)
        out = torch.zeros(vocab_size, 1 + g.shape[1], dtype=g.dtype, device=g.device)
        return out.index_add_(0, self.tokens, torch.cat((c_a[:, None], c_B), dim=1))


def row_terms(
    E: torch.Tensor,
    p: torch.Tensor,
    W: torch.Tensor,
    counts: TokenCounts,
    *,
    check_input: bool = True,
) -> RowTerms:
    """:class:`RowTerms` of the model ``(E, p, W)`` on ``counts`` (no gradient),
    after the checks of :func:`count_heads_output` (``check_input=False``: of arguments
    already checked, ``counts`` on ``E``'s device). The finiteness of the scores is
    checked in either case, from the scores themselves."""
    if check_input:
        counts = check_heads_arguments(E, p, W, counts)
    with torch.no_grad():
        scores = E @ torch.cat((p[:, None], W), dim=1)
        check_finite_scores(scores, E=E, p=p, W=W)
        return RowTerms(scores[:, 0], scores[:, 1:], counts)


class _CountAttention(torch.autograd.Function):
    """``f`` (n, K) with a hand-written backward (see the module docstring)."""

    @staticmethod
    def forward(ctx, E, p, W, counts):  # type: ignore[override]
        PW = torch.cat((p[None, :], W.t())).contiguous()  # (1 + K, d)
        # (V, 1 + K): one pass over E
        scores = kernels.scores(E, PW, check_input=False)
        a, B = scores[:, 0], scores[:, 1:]
        u = torch.exp(a - a.max())
        A, _ = counts.sparse_matrices(E.dtype)
        nd = kernels.csr_times(
            A, torch.cat((u[:, None], u[:, None] * B), dim=1), check_input=False
        )
        den, num = nd[:, 0], nd[:, 1:]
        floor = counts.float_lengths(E.dtype) * torch.finfo(E.dtype).tiny ** 0.5
        # one synchronisation for three facts: the scores' sum is finite unless some
        # score is (a NaN or infinity in E, p or W reaches its row's score) or the sum
        # overflows (checked exactly below); whether every row's mass is represented;
        # the cancellation ratio of the module docstring
        norms = torch.linalg.vector_norm(PW, dim=1)  # ||p||, ||W_1||, ..., ||W_K||
        b_min, b_max = torch.aminmax(B)
        covered = (den >= floor).all().to(E.dtype)
        probe, covered, b_min, b_max, p_norm, *head = torch.cat(
            (torch.stack((scores.sum(), covered, b_min, b_max)), norms)
        ).tolist()
        rho = p_norm * max(abs(b_min), abs(b_max))
        if not math.isfinite(probe):
            check_finite_scores(scores, E=E, p=p, W=W)
        ctx.counts = counts
        if covered:
            ctx.rows = None
            # the row-shift backward, built when it is needed
            ctx.accurate = not rho <= CANCELLATION_LIMIT * min(head)
            f = num / den[:, None]
            ctx.save_for_backward(E, PW, a, B, u, den, f)
            return f
        ctx.rows = RowTerms(a, B, counts)
        ctx.save_for_backward(E, PW)
        return ctx.rows.f

    @staticmethod
    @once_differentiable
    def backward(ctx, g):  # type: ignore[override]
        E, PW = ctx.saved_tensors[:2]
        rows = ctx.rows
        if rows is None and ctx.accurate:
            a, B = ctx.saved_tensors[2:4]
            rows = RowTerms(a, B, ctx.counts)
        if rows is not None:
            G = rows.score_gradient(g, E.shape[0])
        else:
            G = vocabulary_shift_gradient(ctx, g)
        dE = dp = dW = None
        if ctx.needs_input_grad[0]:
            # one write
            dE = kernels.low_rank(G, PW, gradient_buffer(E), check_input=False)
        if ctx.needs_input_grad[1] or ctx.needs_input_grad[2]:
            # (1 + K, d): one pass over E
            GtE = kernels.weighted_rows(E, G, check_input=False)
            dp, dW = GtE[0], GtE[1:].t()
        return dE, dp, dW, None


def vocabulary_shift_gradient(ctx, g: torch.Tensor) -> torch.Tensor:
    """``(V, 1 + K)`` ``[G_a, G_B]`` from two sparse products: with ``R = g / den``
    and ``r_D = -sum_k R_k f_k``, ``A^T [r_D, R]`` gives ``(z_D, Z_N)`` per token;
    ``G_B = u Z_N``, ``G_a = u (z_D + sum_k B_k Z_N,k)``."""
    _, _, _, B, u, den, f = ctx.saved_tensors
    _, At = ctx.counts.sparse_matrices(u.dtype)
    R = g / den[:, None]
    rD = -(R * f).sum(dim=1)
    z = kernels.csr_times(
        At, torch.cat((rD[:, None], R), dim=1), check_input=False
    )  # (V, 1 + K)
    G = torch.empty_like(z)
    torch.mul(u[:, None], z[:, 1:], out=G[:, 1:])  # G_B
    if B.shape[1] == 1:
        torch.addcmul(z[:, 0], B[:, 0], z[:, 1], out=G[:, 0])
    else:
        torch.add(z[:, 0], (B * z[:, 1:]).sum(dim=1), out=G[:, 0])
    G[:, 0].mul_(u)  # G_a
    return G


def check_heads_arguments(
    E: torch.Tensor, p: torch.Tensor, W: torch.Tensor, counts: object
) -> TokenCounts:
    """Check the arguments of :func:`count_heads_output` (all but their finiteness,
    which the forward pass finds from the scores); return ``counts`` on ``E``'s
    device."""
    check_head_matrix(W, E)
    check_parameters(E, p, W[:, 0])
    return check_counts(counts, E.shape[0]).to(E.device)


def count_heads_output(
    E: torch.Tensor,
    p: torch.Tensor,
    W: torch.Tensor,
    counts: TokenCounts,
    *,
    check_input: bool = True,
) -> torch.Tensor:
    """``(n, K)`` outputs ``f_ik = sum_s pi_is (E_s . W_k)`` of every row of ``counts``.

    ``E`` (V, d), ``p`` (d,) and ``W`` (d, K) are float32 or float64 tensors of one
    dtype and device; ``counts`` a :class:`TokenCounts` over exactly ``V`` tokens (moved
    to ``E``'s device). Differentiable in ``E``, ``p`` and ``W`` (first derivatives).
    Raises ``ValueError`` (or a ``TypeError`` that is also one) naming the argument for
    a wrong type, shape, dtype, device or vocabulary, and for NaN or infinity in ``E``,
    ``p`` or ``W``. ``check_input=False`` skips the checks of the arguments, for the
    entry points that have checked them (``counts`` on ``E``'s device).

    On CUDA this is the engine's GPU form
    (:func:`attnbook.engine.gpu.attention.gpu_count_heads_output`: every sum in a fixed
    order, no wait for the host), unless ``ATTNBOOK_GPU_ENGINE=0`` asks for the form
    written for the CPU. The GPU form does not look for NaN or infinity in its scores:
    they reach the outputs and the loss, which
    :func:`attnbook.models.training.training_step` refuses."""
    if check_input:
        counts = check_heads_arguments(E, p, W, counts)
    if E.device.type == "cuda":  # the GPU package is imported only where it runs
        from attnbook.engine.gpu.attention import (
            gpu_count_heads_output,
            use_gpu_engine,
        )

        if use_gpu_engine(E):
            return gpu_count_heads_output(E, p, W, counts)
    return _CountAttention.apply(E, p, W, counts)
