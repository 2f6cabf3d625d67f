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
``dtau`` halved (the step left the region where Euler tracks the flow).

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

from dataclasses import dataclass, field

import numpy as np
import torch

from attnbook.data.labels import as_signed_labels
from attnbook.engine.counts import TokenCounts, as_token_counts
from attnbook.engine.segments import segment_sum
from attnbook.models.parameters import init_parameters
from attnbook.theory.max_margin import selection_gaps, selection_sets
from attnbook.theory.one_step import one_gradient_step

__all__ = [
    "FlowProblem",
    "FlowState",
    "FlowPath",
    "gradient_flow",
    "selected_mass",
    "unselected_mass",
    "limit_selection",
    "direction_cosines",
    "one_step_problem",
    "value_gap",
    "path_summary",
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
        return FlowState(p, loss, self.E.T @ g_tok, f, gap, ref, pi)

    def loss_change(self, old: FlowState, p_new: torch.Tensor) -> float:
        """``L(p_new) - L(old.p)``, with the top tokens of ``old`` as common
        reference."""
        _, _, gap_new, _ = self._attention_and_gap(p_new, old.ref)
        df = gap_new - old.gap
        terms = torch.log1p(torch.sigmoid(-self.y * old.f) * torch.expm1(-self.y * df))
        return float(terms.mean())

    def loss(self, p: torch.Tensor) -> float:
        return self.state(p).loss


def selected_mass(
    E: torch.Tensor, p: torch.Tensor, sequences: object, selected: object
) -> np.ndarray:
    """Per sequence, the total attention mass on the tokens of ``selected[i]``."""
    counts = as_token_counts(sequences, E.shape[0]).to(E.device)
    problem = FlowProblem(
        E,
        torch.zeros(E.shape[1], dtype=E.dtype, device=E.device),
        counts,
        np.ones(counts.n_sequences),
    )
    return _selected_mass(
        problem,
        problem._attention_and_gap(p.detach().to(torch.float64))[0],
        _selection_mask(problem, selected),
    )


def unselected_mass(
    E: torch.Tensor, p: torch.Tensor, sequences: object, selected: object
) -> np.ndarray:
    """Per sequence, the attention mass on the tokens *not* in ``selected[i]``.

    Summed from the small terms themselves, so it keeps full relative precision when it
    is of order ``1e-30`` (``1 - selected_mass`` would round to zero).
    """
    counts = as_token_counts(sequences, E.shape[0]).to(E.device)
    problem = FlowProblem(
        E,
        torch.zeros(E.shape[1], dtype=E.dtype, device=E.device),
        counts,
        np.ones(counts.n_sequences),
    )
    pi = problem._attention_and_gap(
        p.detach().to(device=E.device, dtype=torch.float64)
    )[0]
    return _selected_mass(problem, pi, ~_selection_mask(problem, selected))


def _selection_mask(problem: FlowProblem, selected: object) -> torch.Tensor:
    sets = selection_sets(selected, problem.n)
    rows = problem.rows.cpu().numpy()
    toks = problem.tok.cpu().numpy()
    mask = np.fromiter(
        (int(t) in sets[r] for r, t in zip(rows, toks)), dtype=bool, count=rows.size
    )
    return torch.from_numpy(mask).to(problem.device)


def _selected_mass(
    problem: FlowProblem, pi: torch.Tensor, mask: torch.Tensor
) -> np.ndarray:
    return segment_sum(pi * mask, problem.rows, problem.n).cpu().numpy()


def limit_selection(
    E: torch.Tensor, p: torch.Tensor, sequences: object, threshold: float = 1e-6
) -> list[np.ndarray]:
    """Per sequence, the tokens whose attention mass at ``p`` is at least ``threshold``.

    At the end of a long flow, tokens that the limit selects keep an attention of order
    one while the others have ``exp(-margin)``, so any threshold between the two reads
    off the selection.
    """
    counts = as_token_counts(sequences, E.shape[0]).to(E.device)
    problem = FlowProblem(
        E,
        torch.zeros(E.shape[1], dtype=E.dtype, device=E.device),
        counts,
        np.ones(counts.n_sequences),
    )
    pi = problem._attention_and_gap(p.detach().to(torch.float64))[0].cpu().numpy()
    indptr = counts.indptr.cpu().numpy()
    toks = counts.token_ids.cpu().numpy()
    return [toks[a:b][pi[a:b] >= threshold] for a, b in zip(indptr[:-1], indptr[1:])]


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


def _default_t0(problem: FlowProblem, dtau: float) -> float:
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
    if not dtau > 0:
        raise ValueError(f"dtau must be positive, got {dtau}")
    problem = FlowProblem(E, v, sequences, labels)
    if t0 is None:
        t0 = _default_t0(problem, dtau)
    if not t0 > 0:
        raise ValueError(f"t0 must be positive, got {t0}")
    t_end = float(np.exp(log_t_max))
    if t_end <= t0:
        raise ValueError(
            f"log_t_max={log_t_max} ends before the first step (t0={t0:.3g})"
        )
    p = p0.detach().to(device=problem.device, dtype=torch.float64).clone()
    if p.shape != (problem.dim,):
        raise ValueError(f"p0 must have shape ({problem.dim},), got {tuple(p0.shape)}")
    mask = _selection_mask(problem, selected) if selected is not None else None
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
            masses.append(_selected_mass(problem, st.attention, mask))
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
        if problem.loss_change(st, p_new) > 0:
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


def one_step_problem(
    data: object,
    dim: int,
    eta: float,
    *,
    seed: int,
    embed_scale: float = 1.0,
    device: torch.device | str | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The setting of the implicit-bias theorem for one random seed: ``(E1, v, p0)``.

    Draws ``E0`` with i.i.d. ``N(0, embed_scale^2 / dim)`` entries and ``p0``, ``v``
    with ``N(0, 1 / dim)`` entries (:func:`attnbook.models.parameters.init_parameters`,
    float64, generator seeded with ``seed``), and takes one full-batch gradient step of
    size ``eta`` on ``E`` alone (:func:`attnbook.theory.one_step.one_gradient_step`) on
    ``data`` (anything with ``.counts`` and ``.labels``). ``p0`` is the initial
    ``<cls>`` vector, used both in the step and as the starting point of the flow.
    """
    counts = data.counts
    gen = torch.Generator().manual_seed(int(seed))
    params = init_parameters(
        counts.vocab_size,
        dim,
        scale=embed_scale,
        generator=gen,
        dtype=torch.float64,
        device=device,
        names=("E",),
    )
    params.update(
        init_parameters(
            counts.vocab_size,
            dim,
            scale=1.0,
            generator=gen,
            dtype=torch.float64,
            device=device,
            names=("p", "v"),
        )
    )
    E1 = one_gradient_step(params, counts, data.labels, eta)
    return E1.detach(), params["v"].detach(), params["p"].detach()


def value_gap(
    E: torch.Tensor,
    v: torch.Tensor,
    sequences: object,
    labels: object,
    selected: object,
) -> np.ndarray:
    """Per sequence, ``min_{a in S_i} y_i b_a - max_{s not in S_i} y_i b_s`` with ``b =
    E v``.

    Positive in every sequence means the selected tokens are the loss-optimal ones:
    putting attention anywhere else raises the sequence's loss. It is the hypothesis
    under which the flow's selection is ``selected``.
    """
    counts = as_token_counts(sequences, E.shape[0])
    y = as_signed_labels(labels, counts.n_sequences).numpy()
    sets = selection_sets(selected, counts.n_sequences)
    b = (E.detach() @ v.detach()).double().cpu().numpy()
    return selection_gaps(b, counts, sets, signs=y)


def path_summary(
    path: FlowPath, p_mm: torch.Tensor | np.ndarray, late_from: float
) -> dict[str, float]:
    """Statistics of a flow path against the max-margin direction ``p_mm``.

    ``late_from`` is the ``log t`` where the late phase starts; the late checkpoints are
    those with ``log t >= late_from``. Returns

    - ``cos_end``: ``cos(p(t_end), p_mm)``;
    - ``max_rel_increase``: the largest relative increase of ``1 - cos`` between
      consecutive late checkpoints (``<= 0`` when ``1 - cos`` decreases all through the
      late phase);
    - ``slope_ratio``: the least-squares slope of ``||p(t)||`` against ``log t`` over
      the late phase, divided by ``||p_mm||`` (the argument predicts one);
    - ``angle_exponent``: ``k`` in the late-phase fit ``1 - cos ~ C (log t)^{-k}``;
    - ``min_mass``: the smallest attention mass on the selected tokens at the end
      (``nan`` when the path recorded no selection);
    - ``min_grad_along``: the smallest ``cos(-grad L, p_mm)`` recorded (``nan`` if
      none).
    """
    q = (
        p_mm.detach().cpu().double().numpy()
        if isinstance(p_mm, torch.Tensor)
        else np.asarray(p_mm, float)
    )
    cos = path.cosines(q)
    with np.errstate(divide="ignore"):
        log_t = np.log(path.t)
    late = log_t >= late_from
    if late.sum() < 3:
        raise ValueError(f"fewer than 3 checkpoints with log t >= {late_from}")
    gap = 1.0 - cos[late]
    slope = np.polyfit(log_t[late], path.norms[late], 1)[0]
    k = -np.polyfit(np.log(log_t[late]), np.log(np.maximum(gap, 1e-300)), 1)[0]
    return {
        "cos_end": float(cos[-1]),
        "max_rel_increase": float((np.diff(gap) / gap[:-1]).max()),
        "slope_ratio": float(slope / np.linalg.norm(q)),
        "angle_exponent": float(k),
        "min_mass": float(path.selected_mass[-1].min())
        if path.selected_mass.size
        else float("nan"),
        "min_grad_along": float(path.grad_along.min())
        if path.grad_along.size
        else float("nan"),
    }
