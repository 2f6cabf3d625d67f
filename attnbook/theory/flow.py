"""Gradient flow on the ``<cls>`` vector ``p`` with ``E`` and ``v`` frozen: explicit
Euler steps in logarithmic time, relative to each sequence's top-scoring token (exact
at any ``||p||``), what a path says, and the theorem's setting (one step, then the
flow)."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import NamedTuple, Sequence

import numpy as np
import torch

from attnbook.engine.counts import as_token_counts
from attnbook.engine.segments import row_shift, segment_sum
from attnbook.models.parameters import init_parameters
from attnbook.theory.max_margin import selection_sets
from attnbook.theory.one_step import one_gradient_step
from attnbook.validation import (
    as_signed_labels,
    check_count,
    check_finite,
    check_finite_real,
    check_positive_real,
)

__all__ = [
    "FlowProblem",
    "FlowPath",
    "batched_gradient_flow",
    "gradient_flow",
    "unselected_mass",
    "limit_selection",
    "one_step_setting",
    "one_step_flows",
    "value_gap",
    "pair_derivatives",
]

F64 = torch.float64

#: A step is rejected when the loss rises by more than this many units of the float64
#: rounding of the output changes (below it the sign is noise: a saddle would halve the
#: step for ever).
ROUNDING_FLOOR = 8 * 2.0**-53


class FlowProblem:
    """The flow's frozen ``E`` (V, d), ``v`` (d,), corpus and +-1 labels (float64)."""

    def __init__(
        self, E: torch.Tensor, v: torch.Tensor, sequences: object, labels: object
    ):
        if not isinstance(E, torch.Tensor) or E.ndim != 2:
            raise ValueError("E must be a (V, d) tensor")
        if not isinstance(v, torch.Tensor) or v.shape != (E.shape[1],):
            raise ValueError(f"v must be a ({E.shape[1]},) tensor")
        check_finite(E=E, v=v)
        self.device = E.device
        self.E = E.detach().to(torch.float64)
        self.v = v.detach().to(device=self.device, dtype=torch.float64)
        self.counts = as_token_counts(sequences, E.shape[0]).to(self.device)
        self.y = as_signed_labels(labels, self.counts.n_sequences).to(self.device)
        self.b = self.E @ self.v
        self.rows = self.counts.row_ids
        self.tok = self.counts.token_ids
        self.cnt = self.counts.counts.to(torch.float64)
        self.n = self.counts.n_sequences

    def attention(self, p: torch.Tensor) -> torch.Tensor:
        """Attention mass of every stored entry at ``p``."""
        p = p.detach().to(device=self.device, dtype=torch.float64)
        a_tok = (self.E @ p)[self.tok]
        w = self.cnt * row_shift(a_tok, self.rows, self.n)[1]
        return w / segment_sum(w, self.rows, self.n)[self.rows]

    def padded(
        self, mask: torch.Tensor | None, m: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Token ids, counts and selection flags (``mask``) as ``(n, m)`` (padding:
        token 0, count 0)."""
        n, f64 = self.n, torch.float64
        pos = torch.arange(self.tok.numel(), device=self.device)  # within its sequence
        pos = pos - self.counts.indptr.to(self.device)[self.rows]
        tok = torch.zeros(n, m, dtype=torch.int64, device=self.device)
        cnt = torch.zeros(n, m, dtype=f64, device=self.device)
        sel = torch.zeros(n, m, dtype=f64, device=self.device)
        tok[self.rows, pos] = self.tok
        cnt[self.rows, pos] = self.cnt
        if mask is not None:
            sel[self.rows, pos] = mask.to(f64)
        return tok, cnt, sel

    def selection_mask(self, selected: object) -> torch.Tensor:
        """``(nnz,)`` bool: whether each stored entry's token is in ``selected[i]``."""
        sets = selection_sets(selected, self.n)
        rows = self.rows.cpu().numpy()
        toks = self.tok.cpu().numpy()
        mask = np.fromiter(
            (int(t) in sets[r] for r, t in zip(rows, toks)),
            dtype=bool,
            count=rows.size,
        )
        return torch.from_numpy(mask).to(self.device)


@dataclass
class FlowPath:
    """A flow at ``K`` checkpoints: ``t`` (``t[0] = 0``), ``p`` (K, d), ``loss``,
    ``selected_mass`` (K, n), Euler steps accepted and rejected, ``grad_along``."""

    t: np.ndarray
    p: np.ndarray
    loss: np.ndarray
    selected_mass: np.ndarray
    steps: int
    rejected: int
    grad_along: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def norms(self) -> np.ndarray:
        return np.linalg.norm(self.p, axis=1)

    def cosines(self, direction: torch.Tensor | np.ndarray) -> np.ndarray:
        """``cos(p(t), direction)`` at every checkpoint (0 where ``p(t) = 0``)."""
        q = direction
        q = np.asarray(q.detach().cpu() if isinstance(q, torch.Tensor) else q, float)
        norms = self.norms * np.linalg.norm(q)
        return np.divide(self.p @ q, norms, out=np.zeros(len(self.p)), where=norms > 0)


class FlowBatch:
    """``B`` problems padded to ``(n, m)`` distinct tokens, in the coordinates ``c`` of
    each ``E``'s row space (``p = p0 + Q c``, ``E = R Q^T``: a step is ``O(V k)``)."""

    def __init__(self, problems, p0s, selected, directions, device):
        B = len(problems)
        V = max(pr.E.shape[0] for pr in problems)
        self.k = k = max(min(pr.E.shape) for pr in problems)
        self.n = n = max(pr.n for pr in problems)
        m = max(int(torch.diff(pr.counts.indptr).max()) for pr in problems)
        self.R = torch.zeros(B, V, k, dtype=F64, device=device)  # E = R Q^T
        self.a0 = torch.zeros(B, V, dtype=F64, device=device)
        self.b = torch.zeros(B, V, dtype=F64, device=device)
        self.Eq = torch.zeros(B, V, dtype=F64, device=device)
        self.tok = torch.zeros(B, n, m, dtype=torch.int64, device=device)
        self.cnt = torch.zeros(B, n, m, dtype=F64, device=device)
        self.sel = torch.zeros(B, n, m, dtype=F64, device=device)
        self.y = torch.zeros(B, n, dtype=F64, device=device)
        self.n_rows = torch.tensor([pr.n for pr in problems], dtype=F64, device=device)
        self.Q = []
        for i, pr in enumerate(problems):
            Vi, ki = pr.E.shape[0], min(pr.E.shape)
            Q, Rt = torch.linalg.qr(pr.E.T)  # E^T = Q Rt, Q (d, ki)
            self.Q.append(Q)
            self.R[i, :Vi, :ki] = Rt.T.to(device)
            self.a0[i, :Vi] = (pr.E @ p0s[i]).to(device)
            self.b[i, :Vi] = pr.b.to(device)
            if directions[i] is not None:
                q = directions[i].to(device=pr.device, dtype=F64)
                self.Eq[i, :Vi] = (pr.E @ (q / q.norm())).to(device)
            mask = pr.selection_mask(selected[i]) if selected[i] is not None else None
            tok, cnt, sel = pr.padded(mask, m)
            self.tok[i, : pr.n], self.cnt[i, : pr.n] = tok.to(device), cnt.to(device)
            self.sel[i, : pr.n] = sel.to(device)
            self.cnt[i, pr.n :, 0] = 1.0  # padded rows: one dummy entry, zero label
            self.y[i, : pr.n] = pr.y.to(device=device, dtype=F64)
        self.log_cnt = torch.log(self.cnt)  # -inf on padding
        self.tok_flat = self.tok.flatten(1)
        self.b_tok = torch.gather(self.b, 1, self.tok_flat).view_as(self.cnt)
        self.row_mask = (self.y != 0).to(F64)

    def scores(self, c: torch.Tensor) -> torch.Tensor:
        return self.a0 + torch.bmm(self.R, c.unsqueeze(2)).squeeze(2)

    def state(self, c: torch.Tensor) -> dict[str, torch.Tensor]:
        """Loss, gradient (in ``c``), outputs and attention at ``c``, relative to every
        sequence's top-scoring token."""
        a = torch.gather(self.scores(c), 1, self.tok_flat).view_as(self.log_cnt)
        a = a + self.log_cnt  # padding: -inf
        w = row_shift(a)[1]
        ref = torch.gather(self.tok, 2, a.argmax(dim=2, keepdim=True)).squeeze(2)
        pi = w / w.sum(dim=2, keepdim=True)
        b_ref = torch.gather(self.b, 1, ref)
        db = self.b_tok - b_ref.unsqueeze(2)
        gap = (pi * db).sum(dim=2)
        f = b_ref + gap
        margin = self.y * f
        loss = (torch.nn.functional.softplus(-margin) * self.row_mask).sum(1)
        dloss_df = -self.y * torch.sigmoid(-margin) / self.n_rows[:, None]
        coef = dloss_df.unsqueeze(2) * pi * (db - gap.unsqueeze(2))
        g_tok = torch.zeros_like(self.b).scatter_add_(1, self.tok_flat, coef.flatten(1))
        grad = torch.bmm(g_tok.unsqueeze(1), self.R).squeeze(1)  # (B, k) = R^T g
        return {
            "loss": loss / self.n_rows,
            "grad": grad,
            "g_tok": g_tok,
            "f": f,
            "b_ref": b_ref,
            "gap": gap,
            "pi": pi,
            "spread": (pi * db.abs()).sum(dim=2),
        }

    def loss_change(self, old: dict, new: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """``(B,)`` ``n (L(new) - L(old))`` and its rounding (``ROUNDING_FLOOR``)."""
        df = (new["b_ref"] - old["b_ref"]) + (new["gap"] - old["gap"])
        weight = torch.sigmoid(-self.y * old["f"])
        terms = torch.log1p(weight * torch.expm1(-self.y * df))
        floor = ROUNDING_FLOOR * weight * (old["spread"] + new["spread"])
        return (terms * self.row_mask).sum(1), (floor * self.row_mask).sum(1)


def _as_list(x, B: int, name: str) -> list:
    if x is None:
        return [None] * B
    x = list(x)
    if len(x) != B:
        raise ValueError(f"{name} must have one entry per problem ({B}), got {len(x)}")
    return x


def batched_gradient_flow(
    problems: Sequence[tuple],
    *,
    log_t_max: float = 40.0,
    dtau: float = 0.02,
    check_every: int = 25,
    selected: Sequence[object] | None = None,
    directions: Sequence[torch.Tensor | None] | None = None,
    max_steps: int = 200_000,
    grow_after: int = 50,
    device: torch.device | str | None = None,
    on_max_steps: str = "raise",
    t0: Sequence[float | None] | None = None,
    n_checkpoints: int | None = None,
) -> list[FlowPath]:
    """Integrate ``dp/dt = -grad L(p)`` for every ``(E, v, sequences, labels, p0)``
    until ``t = e^{log_t_max}``: Euler steps ``h = dtau (t0 + t)``; a step that raises
    the loss beyond its rounding is rejected and halves ``dtau`` (doubled back after
    ``grow_after`` accepted steps). ``selected``/``directions`` record the mass on the
    selected tokens and ``cos(-grad L, q)``. Checkpoints every ``check_every``
    iterations (or ``n_checkpoints`` log-spaced) and at the end; after ``max_steps``:
    ``RuntimeError``, or with ``on_max_steps="stop"`` the paths as they are."""
    check_positive_real(dtau, "dtau")
    check_finite_real(log_t_max, "log_t_max")
    check_count(check_every, "check_every")
    if n_checkpoints is not None:
        check_count(n_checkpoints, "n_checkpoints")
    if on_max_steps not in ("raise", "stop"):
        raise ValueError(
            f"on_max_steps must be 'raise' or 'stop', got {on_max_steps!r}"
        )
    problems = list(problems)
    if not problems:
        raise ValueError("problems is empty")
    B = len(problems)
    selected = _as_list(selected, B, "selected")
    directions = _as_list(directions, B, "directions")
    t0s = _as_list(t0, B, "t0")
    built, p0s = [], []
    for i, item in enumerate(problems):
        if len(item) != 5:
            raise ValueError(f"problems[{i}] must be (E, v, sequences, labels, p0)")
        E, v, seqs, labels, p0 = item
        pr = FlowProblem(E, v, seqs, labels)
        d = pr.E.shape[1]
        if not isinstance(p0, torch.Tensor) or p0.shape != (d,):
            raise ValueError(f"problems[{i}]: p0 must be a ({d},) tensor")
        if not bool(torch.isfinite(p0).all()):
            raise ValueError(f"problems[{i}]: p0 has non-finite entries")
        built.append(pr)
        p0s.append(p0.detach().to(device=pr.device, dtype=F64))
    device = torch.device(device) if device is not None else built[0].device
    batch = FlowBatch(built, p0s, selected, directions, device)
    # by default a first step dtau t0 <= 1 / (B^2 R^2 + 3 B R^2), one over a bound on
    # the Hessian of L (B = max |b_s|, R = max ||E_s||)
    bounds = [(float(pr.b.abs().max()), float(pr.E.norm(dim=1).max())) for pr in built]
    t0s = [
        1.0 / (max(b * b * r * r + 3 * b * r * r, 1e-12) * dtau) if t is None else t
        for (b, r), t in zip(bounds, t0s)
    ]
    for t in t0s:
        check_positive_real(t, "t0")
    t0 = torch.tensor(t0s, dtype=F64, device=device)
    t_end = float(np.exp(log_t_max))
    if float(t0.max()) >= t_end:
        raise ValueError(f"log_t_max={log_t_max} ends before the first step")
    times = None  # with n_checkpoints: per problem, the times to record at or after
    if n_checkpoints is not None:
        log_t0 = np.log(t0.cpu().numpy())
        times = [np.exp(np.linspace(lt, log_t_max, n_checkpoints)) for lt in log_t0]

    c = torch.zeros(B, batch.k, dtype=F64, device=device)
    t = torch.zeros(B, dtype=F64, device=device)
    step = torch.full((B,), float(dtau), dtype=F64, device=device)
    steps = torch.zeros(B, dtype=torch.int64, device=device)
    rejected = torch.zeros_like(steps)
    streak = torch.zeros_like(steps)
    marks: list[tuple] = []

    def record(st: dict) -> None:
        g = st["g_tok"]
        gn = st["grad"].norm(dim=1)
        along = -(g * batch.Eq).sum(1) / torch.where(gn > 0, gn, 1.0)
        mass = (st["pi"] * batch.sel).sum(2)
        marks.append((t.clone(), c.clone(), st["loss"], mass, along))

    st = batch.state(c)
    record(st)
    passed, last = [0] * B, 0  # times passed by each problem; last iteration recorded
    for it in range(1, max_steps + 1):
        active = t < t_end
        h = torch.where(active, torch.minimum(step * (t0 + t), t_end - t), 0.0)
        c_new = c - h[:, None] * st["grad"]
        new = batch.state(c_new)
        change, floor = batch.loss_change(st, new)  # a rise beyond rounding: rejected
        reject = active & (change > floor)
        accept = active & ~reject
        if bool(accept.all()):  # every selection below would be the identity
            streak, c, t, st = streak + 1, c_new, t + h, new
            steps += 1
        else:
            step = torch.where(reject, 0.5 * step, step)
            rejected += reject
            streak = torch.where(accept, streak + 1, 0)
            c = torch.where(accept[:, None], c_new, c)
            t = torch.where(accept, t + h, t)
            steps += accept
            if bool(accept.any()):
                keep = {1: accept, 2: accept[:, None], 3: accept[:, None, None]}
                st = {k: torch.where(keep[x.ndim], new[k], x) for k, x in st.items()}
        grow = accept & (streak >= grow_after) & (step < dtau)
        step = torch.where(grow, torch.clamp(2.0 * step, max=dtau), step)
        streak = torch.where(grow, 0, streak)
        if times is not None:  # the host follows t; a checkpoint when a time is passed
            now = t.tolist()
            done = not any(x < t_end for x in now)
            now = [bisect.bisect_right(ts, x) for ts, x in zip(times, now)]
            if now != passed or done:
                record(st)
                passed, last = now, it
            if done:
                break
        elif it % check_every == 0:
            record(st)
            last = it
            if not bool((t < t_end).any()):
                break
    else:
        if on_max_steps == "raise":
            raise RuntimeError(f"batched_gradient_flow: {max_steps} iterations reached")
        if last != max_steps:
            record(st)
    return _paths(batch, p0s, marks, steps, rejected, selected, times)


def _paths(batch, p0s, marks, steps, rejected, selected, times) -> list[FlowPath]:
    ts, cs, losses, masses, alongs = (torch.stack(x).cpu().numpy() for x in zip(*marks))
    out = []
    for i, p0 in enumerate(p0s):
        keep = np.r_[True, np.diff(ts[:, i]) > 0]  # drop checkpoints after the end
        if times is not None:  # the first step at or after each time, and the end
            kept = np.flatnonzero(keep)
            first = np.searchsorted(ts[kept, i], times[i], side="left")
            pick = np.unique(np.r_[0, first[first < kept.size], kept.size - 1])
            keep = np.zeros_like(keep)
            keep[kept[pick]] = True
        Q = batch.Q[i].cpu().numpy()
        k = Q.shape[1]
        p = p0.cpu().numpy()[None, :] + cs[keep, i, :k] @ Q.T
        n_i = int((batch.y[i] != 0).sum())
        mass = masses[keep, i, :n_i] if selected[i] is not None else np.zeros((0, n_i))
        along = alongs[keep, i] if bool(batch.Eq[i].any()) else np.zeros(0)
        step_counts = int(steps[i]), int(rejected[i])
        out.append(FlowPath(ts[keep, i], p, losses[keep, i], mass, *step_counts, along))
    return out


def gradient_flow(
    E: torch.Tensor,
    v: torch.Tensor,
    sequences: object,
    labels: object,
    p0: torch.Tensor,
    *,
    t0: float | None = None,
    n_checkpoints: int = 120,
    selected: object | None = None,
    direction: torch.Tensor | None = None,
    **options,
) -> FlowPath:
    """:func:`batched_gradient_flow` of one problem, ``n_checkpoints`` log-spaced."""
    (path,) = batched_gradient_flow(
        [(E, v, sequences, labels, p0)],
        t0=[t0],
        n_checkpoints=n_checkpoints,
        selected=[selected],
        directions=[direction],
        **options,
    )
    return path


def _attention_problem(E: torch.Tensor, sequences: object) -> FlowProblem:
    """A flow problem on ``sequences`` with a zero head: only its attention is used."""
    counts = as_token_counts(sequences, E.shape[0]).to(E.device)
    zero = torch.zeros(E.shape[1], dtype=E.dtype, device=E.device)
    return FlowProblem(E, zero, counts, np.ones(counts.n_sequences))


def unselected_mass(
    E: torch.Tensor, p: torch.Tensor, sequences: object, selected: object
) -> np.ndarray:
    """Per sequence, the attention mass off ``selected[i]``, summed from the small
    terms (exact where ``1 - selected_mass`` rounds to zero)."""
    problem = _attention_problem(E, sequences)
    mass = problem.attention(p) * ~problem.selection_mask(selected)
    return segment_sum(mass, problem.rows, problem.n).cpu().numpy()


def limit_selection(
    E: torch.Tensor, p: torch.Tensor, sequences: object, threshold: float = 1e-6
) -> list[np.ndarray]:
    """Per sequence, the tokens with attention mass ``>= threshold`` at ``p``."""
    problem = _attention_problem(E, sequences)
    pi = problem.attention(p).cpu().numpy()
    indptr = problem.counts.indptr.cpu().numpy()
    toks = problem.tok.cpu().numpy()
    return [toks[a:b][pi[a:b] >= threshold] for a, b in zip(indptr[:-1], indptr[1:])]


class OneStepSetting(NamedTuple):
    """The embeddings after the step, the head ``v`` and the initial ``p0``."""

    E1: torch.Tensor
    v: torch.Tensor
    p0: torch.Tensor


def one_step_setting(
    data: object,
    dim: int,
    eta: float,
    *,
    seed: int,
    embed_scale: float = 1.0,
    cls_scale: float = 1.0,
    device: torch.device | str | None = None,
) -> OneStepSetting:
    """The implicit-bias setting for one seed: ``E0 ~ N(0, embed_scale^2 / dim)``,
    ``p0 ~ N(0, cls_scale^2 / dim)``, ``v ~ N(0, 1 / dim)`` (drawn at unit scale: the
    same directions at every scale), then one step of size ``eta`` on ``E``."""
    for name, value in (("embed_scale", embed_scale), ("cls_scale", cls_scale)):
        if check_finite_real(value, name) < 0:
            raise ValueError(f"{name} must be >= 0, got {value!r}")
    counts = data.counts
    gen = torch.Generator().manual_seed(int(seed))
    common = dict(scale=1.0, generator=gen, dtype=torch.float64, device=device)
    params = init_parameters(counts.vocab_size, dim, names=("E",), **common)
    params.update(init_parameters(counts.vocab_size, dim, names=("p", "v"), **common))
    params = {k: t.detach() for k, t in params.items()}
    params["E"] = params["E"] * embed_scale
    params["p"] = params["p"] * cls_scale
    E1 = one_gradient_step(params, counts, data.labels, eta)
    return OneStepSetting(E1.detach(), params["v"], params["p"])


def value_gap(
    E: torch.Tensor,
    v: torch.Tensor,
    sequences: object,
    labels: object,
    selected: object,
) -> np.ndarray:
    """Per sequence, ``min_{a in S_i} y_i b_a - max_{s not in S_i} y_i b_s`` (``b = E
    v``; ``+inf`` when ``X_i`` holds no other token)."""
    counts = as_token_counts(sequences, E.shape[0])
    y = as_signed_labels(labels, counts.n_sequences).numpy()
    sets = selection_sets(selected, counts.n_sequences)
    b = (E.detach() @ v.detach()).double().cpu().numpy()
    indptr = counts.indptr.cpu().numpy()
    toks = counts.token_ids.cpu().numpy()
    out = np.full(counts.n_sequences, np.inf)
    for i in range(counts.n_sequences):
        present = toks[indptr[i] : indptr[i + 1]]
        sel = np.array(sorted(sets[i]), dtype=np.int64)
        rest = np.array([s for s in present if int(s) not in sets[i]], dtype=np.int64)
        if rest.size:
            out[i] = (y[i] * b[sel]).min() - (y[i] * b[rest]).max()
    return out


def pair_derivatives(
    scores: object, values: object, counts: object, label: int, a: int, a2: int
) -> dict[str, float]:
    """The derivative of ``y f`` of one sequence along raising ``a_a`` and lowering
    ``a_a2``: by ``autograd``, the ``general``, ``two_token`` forms; ``other_mass``."""
    s = torch.as_tensor(np.asarray(scores, dtype=np.float64)).requires_grad_(True)
    b = torch.as_tensor(np.asarray(values, dtype=np.float64))
    n = torch.as_tensor(np.asarray(counts, dtype=np.float64))
    pi = torch.softmax(s + torch.log(n), dim=0)
    f = pi @ b
    (grad,) = torch.autograd.grad(label * f, s)
    pi, f = pi.detach(), float(f.detach())
    return {
        "autograd": float(grad[a] - grad[a2]),
        "general": float(label * (pi[a] * (b[a] - f) - pi[a2] * (b[a2] - f))),
        "two_token": float(2 * label * pi[a] * pi[a2] * (b[a] - b[a2])),
        "other_mass": float(1 - pi[a] - pi[a2]),
    }


def one_step_flows(
    instances: Sequence[object],
    dim: int,
    eta: float,
    *,
    seed0: int,
    log_t_max: float,
    selected: Sequence[object] | None = None,
    device: torch.device | str | None = None,
) -> tuple[list[OneStepSetting], list[FlowPath]]:
    """:func:`one_step_setting` of every instance (seed ``seed0 + i``), and their flows
    as one batch."""
    settings = [
        one_step_setting(inst, dim, eta, seed=seed0 + i, device=device)
        for i, inst in enumerate(instances)
    ]
    problems = [
        (E1, v, inst.counts, inst.labels, p0)
        for (E1, v, p0), inst in zip(settings, instances)
    ]
    return settings, batched_gradient_flow(
        problems, log_t_max=log_t_max, selected=selected
    )
