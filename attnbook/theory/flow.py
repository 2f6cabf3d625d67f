"""Gradient flow on the ``<cls>`` vector ``p`` with the embeddings ``E`` and the head
``v`` frozen.

The loss is ``L(p) = (1/n) sum_i log(1 + exp(-y_i f_i(p)))`` with ``f_i`` the attention
output of :mod:`attnbook.models.attention`. Along the flow ``||p(t)||`` grows like ``log
t`` and the gradient decays like ``1/t``, so plain gradient descent with a fixed step
needs about ``e^k`` steps to reach ``||p|| ~ k``. :func:`gradient_flow` therefore
integrates in *logarithmic time*: with ``tau = log(1 + t / t0)`` the flow reads
``dp/dtau = -(t0 + t) grad L(p)``, whose right-hand side stays of order one, and
explicit Euler steps of constant size ``dtau`` reach ``t = e^k`` in ``O(k / dtau)``
steps. Each step is a plain gradient step with step size ``h = dtau (t0 + t)``,
proportional to the elapsed time. A step that would increase the loss is rejected and
``dtau`` halved (the step left the region where Euler tracks the flow); a rise below the
rounding of its own computation (:data:`ROUNDING_FLOOR`) does not count.

Numerical stability at large ``||p||``: the softmax is shifted by the per-sequence
maximum score (as in :mod:`attnbook.models.attention`), and the loss and its gradient
are computed *relative to the top-scoring token* ``r_i`` of each sequence:

    f_i - b_{r_i} = sum_s pi_s (b_s - b_{r_i}),
    d f_i / d a_s = pi_s ((b_s - b_{r_i}) - (f_i - b_{r_i})),

with ``a_s = p.E_s``, ``b_s = v.E_s`` and ``pi_s`` the attention mass. When attention
has concentrated on ``r_i``, the gradient is of order ``e^{-margin}`` (``1e-40`` and
smaller); writing it as above keeps full relative precision, whereas ``b_s - f_i``
computed from ``f_i`` itself would be pure rounding error (``1e-16``) and would swamp
it. The loss *change* of a step is computed the same way, so the acceptance test works
when ``L`` no longer changes in its 16th digit.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field

import numpy as np
import torch

from attnbook.data.labels import as_signed_labels
from attnbook.engine.counts import TokenCounts, as_token_counts
from attnbook.engine.segments import segment_sum
from attnbook.theory.max_margin import selection_sets

#: A step is rejected when the loss rises by more than this many units of float64
#: rounding (2^-53) of the terms ``pi_s |b_s - b_{r_i}|`` whose sums give the change of
#: every output: below that, the sign of the change is rounding noise. Without it the
#: integrator halves its step for ever at a stationary point whose gradient is pure
#: rounding (a symmetric saddle).
ROUNDING_FLOOR = 8 * 2.0**-53

__all__ = [
    "FlowProblem",
    "FlowState",
    "FlowPath",
    "gradient_flow",
    "default_t0",
    "finite_number",
    "ROUNDING_FLOOR",
    "direction_cosines",
]


@dataclass
class FlowState:
    """Loss, gradient and attention of the problem at one ``p`` (all float64
    tensors)."""

    p: torch.Tensor
    loss: float
    grad: torch.Tensor
    f: torch.Tensor  # (n,) outputs
    gap: torch.Tensor  # (n,) f_i - b_{r_i}, to full relative precision
    ref: torch.Tensor  # (n,) id of the top-scoring token r_i
    attention: torch.Tensor  # (nnz,) attention mass of every stored entry
    spread: torch.Tensor | None = None  # (n,) sum_s pi_s |b_s - b_{r_i}|


class FlowProblem:
    """The frozen data of the flow: ``E`` (V, d), ``v`` (d,), the corpus and the labels.

    Everything is converted to float64 on ``E``'s device.
    """

    def __init__(
        self, E: torch.Tensor, v: torch.Tensor, sequences: object, labels: object
    ):
        if not isinstance(E, torch.Tensor) or E.ndim != 2:
            raise ValueError("E must be a (V, d) tensor")
        if not isinstance(v, torch.Tensor) or v.shape != (E.shape[1],):
            raise ValueError(f"v must be a ({E.shape[1]},) tensor")
        if not bool(torch.isfinite(E).all()):
            raise ValueError("E has non-finite entries (nan or inf)")
        if not bool(torch.isfinite(v).all()):
            raise ValueError("v has non-finite entries (nan or inf)")
        self.device = E.device
        self.E = E.detach().to(torch.float64)
        self.v = v.detach().to(device=self.device, dtype=torch.float64)
        self.counts: TokenCounts = as_token_counts(sequences, E.shape[0]).to(
            self.device
        )
        self.y = as_signed_labels(labels, self.counts.n_sequences).to(self.device)
        self.b = self.E @ self.v
        self.rows = self.counts.row_ids
        self.tok = self.counts.token_ids
        self.cnt = self.counts.counts.to(torch.float64)
        self.n = self.counts.n_sequences

    @property
    def dim(self) -> int:
        return self.E.shape[1]

    def _reference(self, a_tok: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per-row maximum score and the token that attains it."""
        shift = torch.full((self.n,), -torch.inf, dtype=a_tok.dtype, device=self.device)
        shift.scatter_reduce_(0, self.rows, a_tok, reduce="amax", include_self=True)
        is_top = a_tok == shift[self.rows]
        ref = torch.zeros(self.n, dtype=torch.int64, device=self.device)
        ref[self.rows[is_top]] = self.tok[is_top]
        return shift, ref

    def _attention_and_gap(
        self, p: torch.Tensor, ref: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        a_tok = (self.E @ p)[self.tok]
        shift, top = self._reference(a_tok)
        ref = top if ref is None else ref
        w = self.cnt * torch.exp(a_tok - shift[self.rows])
        pi = w / segment_sum(w, self.rows, self.n)[self.rows]
        db = self.b[self.tok] - self.b[ref][self.rows]
        gap = segment_sum(pi * db, self.rows, self.n)
        return pi, db, gap, ref

    def state(self, p: torch.Tensor) -> FlowState:
        """Loss, gradient and attention at ``p`` (stable at any ``||p||``)."""
        p = p.to(device=self.device, dtype=torch.float64)
        pi, db, gap, ref = self._attention_and_gap(p)
        f = self.b[ref] + gap
        margin = self.y * f
        loss = float(torch.nn.functional.softplus(-margin).mean())
        dloss_df = -self.y * torch.sigmoid(-margin) / self.n
        coef = dloss_df[self.rows] * pi * (db - gap[self.rows])
        g_tok = torch.zeros(self.E.shape[0], dtype=torch.float64, device=self.device)
        g_tok.index_add_(0, self.tok, coef)
        spread = segment_sum(pi * db.abs(), self.rows, self.n)
        return FlowState(p, loss, self.E.T @ g_tok, f, gap, ref, pi, spread)

    def loss_change(self, old: FlowState, p_new: torch.Tensor) -> float:
        """``L(p_new) - L(old.p)``, with the top tokens of ``old`` as common
        reference."""
        _, _, gap_new, _ = self._attention_and_gap(p_new, old.ref)
        df = gap_new - old.gap
        terms = torch.log1p(torch.sigmoid(-self.y * old.f) * torch.expm1(-self.y * df))
        return float(terms.mean())

    def step_accepted(self, old: FlowState, p_new: torch.Tensor) -> bool:
        """Whether the step from ``old.p`` to ``p_new`` does not raise the loss by more
        than the rounding of the computation of its change (:data:`ROUNDING_FLOOR`)."""
        pi, db, gap_new, _ = self._attention_and_gap(p_new, old.ref)
        weight = torch.sigmoid(-self.y * old.f)
        change = torch.log1p(weight * torch.expm1(-self.y * (gap_new - old.gap)))
        spread_new = segment_sum(pi * db.abs(), self.rows, self.n)
        floor = ROUNDING_FLOOR * weight * (old.spread + spread_new)
        return float(change.mean()) <= float(floor.mean())

    def loss(self, p: torch.Tensor) -> float:
        return self.state(p).loss

    def attention(self, p: torch.Tensor) -> torch.Tensor:
        """Attention mass of every stored entry at ``p`` (stable at any ``||p||``)."""
        p = p.detach().to(device=self.device, dtype=torch.float64)
        return self._attention_and_gap(p)[0]

    def selection_mask(self, selected: object) -> torch.Tensor:
        """``(nnz,)`` bool: whether each stored entry's token is in ``selected[i]`` of
        its sequence (one token id or a collection per sequence)."""
        sets = selection_sets(selected, self.n)
        rows = self.rows.cpu().numpy()
        toks = self.tok.cpu().numpy()
        mask = np.fromiter(
            (int(t) in sets[r] for r, t in zip(rows, toks)),
            dtype=bool,
            count=rows.size,
        )
        return torch.from_numpy(mask).to(self.device)

    def per_sequence(self, entries: torch.Tensor) -> np.ndarray:
        """Per sequence, the sum of a value given for every stored entry."""
        return segment_sum(entries, self.rows, self.n).cpu().numpy()


@dataclass
class FlowPath:
    """The recorded path of :func:`gradient_flow`, at checkpoints log-spaced in time.

    Attributes
    ----------
    t:
        ``(K,)`` flow times of the checkpoints (``t[0] = 0``).
    p:
        ``(K, d)`` float64 numpy array of ``p(t)``.
    loss:
        ``(K,)`` the loss ``L(p(t))``.
    selected_mass:
        ``(K, n)`` attention mass on ``selected[i]`` in every sequence (empty when no
        selection was given).
    steps, rejected:
        accepted Euler steps and rejected (halved) ones.
    final_dtau:
        the log-time step in use at the end.
    """

    t: np.ndarray
    p: np.ndarray
    loss: np.ndarray
    selected_mass: np.ndarray
    steps: int
    rejected: int
    final_dtau: float
    grad_along: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def norms(self) -> np.ndarray:
        return np.linalg.norm(self.p, axis=1)

    @property
    def p_final(self) -> torch.Tensor:
        return torch.from_numpy(self.p[-1].copy())

    def cosines(self, direction: torch.Tensor | np.ndarray) -> np.ndarray:
        """``cos(p(t), direction)`` at every checkpoint."""
        return direction_cosines(self.p, direction)


def direction_cosines(
    path: np.ndarray, direction: torch.Tensor | np.ndarray
) -> np.ndarray:
    """Cosine between every row of ``path`` and ``direction`` (0 for a zero row)."""
    q = (
        direction.detach().cpu().double().numpy()
        if isinstance(direction, torch.Tensor)
        else np.asarray(direction, float)
    )
    norms = np.linalg.norm(path, axis=1) * np.linalg.norm(q)
    return np.divide(path @ q, norms, out=np.zeros(len(path)), where=norms > 0)


def finite_number(x: object) -> bool:
    """Whether ``x`` is a real finite number (Python or NumPy scalar, not a bool)."""
    return (
        isinstance(x, numbers.Real)
        and not isinstance(x, bool)
        and bool(np.isfinite(float(x)))
    )


def default_t0(problem: FlowProblem, dtau: float) -> float:
    """``t0`` such that the first step ``dtau * t0`` is below ``1 / (smoothness
    bound)``.

    With ``B = max |b_s|`` and ``R = max ||E_s||``, ``|d^2 f / dp^2| <= 3 B R^2`` and
    ``||grad f|| <= 2 B R``, so the Hessian of ``L`` is at most ``B^2 R^2 + 3 B R^2``.
    """
    B = float(problem.b.abs().max())
    R = float(problem.E.norm(dim=1).max())
    smooth = B * B * R * R + 3 * B * R * R
    return 1.0 / (max(smooth, 1e-12) * dtau)


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
    """Integrate ``dp/dt = -grad L(p)`` from ``p(0) = p0`` until ``t = e^{log_t_max}``.

    Euler steps in logarithmic time ``tau = log(1 + t/t0)`` (module docstring): step
    size ``h = dtau (t0 + t)``, halving ``dtau`` whenever a step would increase the loss
    and doubling it again (up to its initial value) after ``grow_after`` accepted steps
    in a row. ``t0`` defaults to a value that makes the first step safe for the
    smoothness of ``L``. Checkpoints are recorded at ``t = 0`` and at ``n_checkpoints``
    times log-spaced between ``t0`` and ``e^{log_t_max}`` (plus the end). ``selected``
    (one token id or a collection per sequence), when given, makes the path record the
    attention mass on those tokens; ``direction``, when given, records ``-grad L .
    direction / (||grad L|| ||direction||)`` at every checkpoint (the alignment of the
    flow's velocity with that direction). Deterministic; runs on ``E``'s device in
    float64.
    """
    if not (finite_number(dtau) and dtau > 0):
        raise ValueError(f"dtau must be a positive finite number, got {dtau!r}")
    if not finite_number(log_t_max):
        raise ValueError(f"log_t_max must be a finite number, got {log_t_max!r}")
    if not isinstance(p0, torch.Tensor):
        raise ValueError(f"p0 must be a torch tensor, got {type(p0).__name__}")
    if not bool(torch.isfinite(p0).all()):
        raise ValueError("p0 has non-finite entries (nan or inf)")
    problem = FlowProblem(E, v, sequences, labels)
    if t0 is None:
        t0 = default_t0(problem, dtau)
    if not (np.isfinite(t0) and t0 > 0):
        raise ValueError(f"t0 must be a positive finite number, got {t0}")
    t_end = float(np.exp(log_t_max))
    if t_end <= t0:
        raise ValueError(
            f"log_t_max={log_t_max} ends before the first step (t0={t0:.3g})"
        )
    p = p0.detach().to(device=problem.device, dtype=torch.float64).clone()
    if p.shape != (problem.dim,):
        raise ValueError(f"p0 must have shape ({problem.dim},), got {tuple(p0.shape)}")
    mask = problem.selection_mask(selected) if selected is not None else None
    q = None
    if direction is not None:
        q = direction.detach().to(device=problem.device, dtype=torch.float64)
        q = q / q.norm()
    marks = list(np.exp(np.linspace(np.log(t0), log_t_max, n_checkpoints)))
    ts, ps, losses, masses, along = [], [], [], [], []

    def record(t: float, st: FlowState) -> None:
        ts.append(t)
        ps.append(st.p.cpu().numpy().copy())
        losses.append(st.loss)
        if mask is not None:
            masses.append(problem.per_sequence(st.attention * mask))
        if q is not None:
            g = st.grad
            gn = float(g.norm())
            along.append(float(-(g @ q)) / gn if gn > 0 else 0.0)

    t, steps, rejected, streak = 0.0, 0, 0, 0
    dtau_max = dtau
    st = problem.state(p)
    record(t, st)
    while t < t_end:
        if steps + rejected >= max_steps:
            raise RuntimeError(
                f"gradient_flow: {max_steps} steps reached at t = {t:.3g} (log t = "
                f"{np.log(t):.2f})"
            )
        h = min(dtau * (t0 + t), t_end - t) if t_end - t > 0 else 0.0
        p_new = st.p - h * st.grad
        if not problem.step_accepted(st, p_new):
            dtau *= 0.5
            rejected += 1
            streak = 0
            continue
        t_new = t + h
        st = problem.state(p_new)
        steps += 1
        streak += 1
        if streak >= grow_after and dtau < dtau_max:
            dtau, streak = min(2.0 * dtau, dtau_max), 0
        while marks and marks[0] <= t_new:
            marks.pop(0)
            if not ts or ts[-1] != t_new:
                record(t_new, st)
        t = t_new
    if ts[-1] != t:
        record(t, st)
    d = problem.dim
    return FlowPath(
        t=np.array(ts),
        p=np.array(ps).reshape(-1, d),
        loss=np.array(losses),
        selected_mass=np.array(masses) if masses else np.zeros((0, problem.n)),
        steps=steps,
        rejected=rejected,
        final_dtau=dtau,
        grad_along=np.array(along),
    )
