"""The integrator of the gradient flow on ``p``: many independent flows as one tensor
program.

The loss is ``L(p) = (1/n) sum_i log(1 + exp(-y_i f_i(p)))`` with ``f_i`` the attention
output of :mod:`attnbook.models.attention`, ``E`` and ``v`` frozen. Along the flow
``||p(t)||`` grows like ``log t`` and the gradient decays like ``1/t``, so plain
gradient descent with a fixed step needs about ``e^k`` steps to reach ``||p|| ~ k``.
The integrator therefore works in *logarithmic time*: with ``tau = log(1 + t / t0)``
the flow reads ``dp/dtau = -(t0 + t) grad L(p)``, whose right-hand side stays of order
one, and explicit Euler steps of constant size ``dtau`` reach ``t = e^k`` in ``O(k /
dtau)`` steps. Each step is a plain gradient step with step size ``h = dtau (t0 + t)``.
A step that would increase the loss is rejected and ``dtau`` halved (the step left the
region where Euler tracks the flow); a rise below the rounding of its own computation
(:data:`~attnbook.theory.flow_problem.ROUNDING_FLOOR`) does not count; ``dtau`` doubles
again (up to its initial value) after ``grow_after`` accepted steps in a row.

:func:`batched_gradient_flow` integrates ``B`` problems at once: seeds, scales,
dimensions, data sets (:func:`attnbook.theory.flow.gradient_flow` is the batch of
one). Every problem keeps its own time, step size and counters; acceptance and
rejection are ``torch.where`` masks, so the loop never waits for the host, and the
batch is asked whether every problem has reached its end time only every
``check_every`` steps (when it also records a checkpoint).

Two reductions make a step cheap:

- *the flow stays in the row space of E*: the gradient ``E^T g`` lies in it, so with
  ``E^T = Q R`` (reduced QR, ``Q`` of shape ``(d, k)``, ``k = min(V, d)``) the path is
  ``p(t) = p0 + Q c(t)`` and the scores are ``a = E p0 + R^T c``: a step costs ``O(V
  k)`` whatever ``d`` is;
- *sequences are padded to a dense* ``(n, m)`` *layout* of their distinct tokens (``m``
  the largest number of distinct tokens in a sequence), so the softmax of every
  sequence of every problem is one dense operation.

Numerical stability at large ``||p||``: every softmax is shifted by its sequence's
maximum score, and the outputs, the loss and its gradient are computed *relative to the
top-scoring token* ``r_i`` of each sequence:

    f_i - b_{r_i} = sum_s pi_s (b_s - b_{r_i}),
    d f_i / d a_s = pi_s ((b_s - b_{r_i}) - (f_i - b_{r_i})),

with ``a_s = p.E_s``, ``b_s = v.E_s`` and ``pi_s`` the attention mass. When attention
has concentrated on ``r_i``, the gradient is of order ``e^{-margin}`` (``1e-40`` and
smaller); written as above it keeps full relative precision, whereas ``b_s - f_i``
computed from ``f_i`` itself would be pure rounding error (``1e-16``) and would swamp
it. The loss *change* of a step is computed the same way, so the acceptance test works
when ``L`` no longer changes in its 16th digit.
"""

from __future__ import annotations

import bisect
from typing import Sequence

import numpy as np
import torch

from attnbook.engine.segments import row_shift
from attnbook.theory.flow_analysis import one_step_problem
from attnbook.theory.flow_problem import (
    ROUNDING_FLOOR,
    FlowPath,
    FlowProblem,
    default_t0,
    finite_number,
)

__all__ = ["FlowBatch", "batched_gradient_flow", "one_step_flows"]

F64 = torch.float64


class FlowBatch:
    """The frozen data of ``B`` problems, padded to common shapes, in the coordinates
    ``c`` of the row space of each ``E`` (``p = p0 + Q c``, ``E = R Q^T``).

    ``problems`` are :class:`FlowProblem` objects, ``p0s`` their starting points;
    ``selected`` and ``directions`` (one entry or ``None`` per problem) what the paths
    record. :meth:`state` gives loss, gradient, outputs and attention at ``c``;
    :meth:`loss_change` the change of the loss between two states and the rounding of
    its computation."""

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

    def subset(self, keep: torch.Tensor) -> "FlowBatch":
        """The batch of the problems ``keep`` (indices), for the integration loop."""
        out = object.__new__(FlowBatch)
        out.k, out.n = self.k, self.n
        for key in ("R", "a0", "b", "Eq", "tok", "cnt", "sel", "y", "n_rows"):
            setattr(out, key, getattr(self, key)[keep])
        for key in ("log_cnt", "tok_flat", "b_tok", "row_mask"):
            setattr(out, key, getattr(self, key)[keep])
        return out

    def scores(self, c: torch.Tensor) -> torch.Tensor:
        return self.a0 + torch.bmm(self.R, c.unsqueeze(2)).squeeze(2)

    def state(self, c: torch.Tensor) -> dict[str, torch.Tensor]:
        """Loss, gradient (in the coordinates ``c``), outputs and attention at ``c``,
        relative to the top-scoring token ``ref`` of every sequence."""
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
        """``(B,)`` ``n (L(new) - L(old))`` and the rounding of its computation
        (:data:`~attnbook.theory.flow_problem.ROUNDING_FLOOR` units of the terms whose
        sums give the change of every output); the change of every output is written
        relative to the reference tokens (exactly zero terms where the references
        agree)."""
        df = (new["b_ref"] - old["b_ref"]) + (new["gap"] - old["gap"])
        weight = torch.sigmoid(-self.y * old["f"])
        terms = torch.log1p(weight * torch.expm1(-self.y * df))
        floor = ROUNDING_FLOOR * weight * (old["spread"] + new["spread"])
        return (terms * self.row_mask).sum(1), (floor * self.row_mask).sum(1)

    def rejects(self, old: dict, new: dict) -> torch.Tensor:
        """``(B,)`` bool: whether the step from ``old`` to ``new`` raises the loss by
        more than the rounding of its computation."""
        change, floor = self.loss_change(old, new)
        return change > floor


def _where(cond: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a`` where the problem's ``cond`` holds, else ``b`` (``cond`` of shape
    ``(B,)``)."""
    return torch.where(cond.view(-1, *([1] * (a.ndim - 1))), a, b)


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
    """Integrate ``dp/dt = -grad L(p)`` for every ``(E, v, sequences, labels, p0)`` of
    ``problems`` until ``t = e^{log_t_max}`` by Euler steps in logarithmic time (module
    docstring); :func:`~attnbook.theory.flow.gradient_flow` is the batch of one.

    ``selected`` (one token id or a collection per sequence) makes the paths record
    the attention mass on those tokens; ``directions``, ``-grad L . q / (||grad L||
    ||q||)`` for the given direction ``q`` (the alignment of the flow's velocity with
    it); one entry or ``None`` per problem. ``t0`` (per problem, ``None``: the default)
    is the time scale of the log-time steps; the default makes the first step safe for
    the smoothness of ``L`` (:func:`~attnbook.theory.flow_problem.default_t0`).
    Checkpoints are recorded at ``t = 0`` and every ``check_every`` iterations (about
    ``check_every * dtau`` apart in ``log t``) until a problem's end time, which is the
    last checkpoint; with ``n_checkpoints``, instead, at the first step at or after
    each of ``n_checkpoints`` times log-spaced between ``t0`` and ``e^{log_t_max}``
    (and at ``t = 0`` and the end). Problems may differ in ``V``, ``d``, ``n`` and
    lengths; the batch runs on ``device`` (default: the first problem's). After
    ``max_steps`` iterations it raises a ``RuntimeError``, or, with
    ``on_max_steps="stop"``, returns the paths as they are (a problem that has not
    reached its end time ends at a checkpoint with ``t < e^{log_t_max}``). Returns one
    :class:`~attnbook.theory.flow_problem.FlowPath` per problem.
    """
    if not (finite_number(dtau) and dtau > 0):
        raise ValueError(f"dtau must be a positive finite number, got {dtau!r}")
    if not finite_number(log_t_max):
        raise ValueError(f"log_t_max must be a finite number, got {log_t_max!r}")
    if not (isinstance(check_every, int) and check_every >= 1):
        raise ValueError(f"check_every must be an integer >= 1, got {check_every!r}")
    if n_checkpoints is not None and not (
        isinstance(n_checkpoints, int) and n_checkpoints >= 1
    ):
        raise ValueError(
            f"n_checkpoints must be an integer >= 1, got {n_checkpoints!r}"
        )
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
        if not isinstance(p0, torch.Tensor) or p0.shape != (pr.dim,):
            raise ValueError(f"problems[{i}]: p0 must be a ({pr.dim},) tensor")
        if not bool(torch.isfinite(p0).all()):
            raise ValueError(f"problems[{i}]: p0 has non-finite entries")
        built.append(pr)
        p0s.append(p0.detach().to(device=pr.device, dtype=F64))
    device = torch.device(device) if device is not None else built[0].device
    batch = FlowBatch(built, p0s, selected, directions, device)
    t0s = [default_t0(pr, dtau) if t is None else t for pr, t in zip(built, t0s)]
    if not all(finite_number(t) and t > 0 for t in t0s):
        raise ValueError(f"t0 must be positive finite numbers, got {t0s}")
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
    # the batch shrinks to its unfinished problems at checkpoints (every row's
    # arithmetic is its own); ``full`` keeps every problem's last recorded values
    rows = torch.arange(B, device=device)
    sub = batch
    full: dict[str, torch.Tensor] = {}
    marks: list[tuple] = []

    def record(st: dict) -> None:
        g = st["g_tok"]
        gn = st["grad"].norm(dim=1)
        along = -(g * sub.Eq).sum(1) / torch.where(gn > 0, gn, 1.0)
        mass = (st["pi"] * sub.sel).sum(2)
        now = dict(t=t, c=c, loss=st["loss"], mass=mass, along=along)
        for key, x in now.items():
            if key not in full:
                full[key] = x.clone()
            else:
                full[key][rows] = x
        marks.append(tuple(full[key].clone() for key in now))

    def finish() -> None:
        for key, x in (("steps", steps), ("rejected", rejected), ("step", step)):
            full.setdefault(key, x.clone())[rows] = x

    st = batch.state(c)
    record(st)
    passed, last = [0] * B, 0  # times passed by each problem; last iteration recorded
    for it in range(1, max_steps + 1):
        active = t < t_end
        h = torch.where(active, torch.minimum(step * (t0 + t), t_end - t), 0.0)
        c_new = c - h[:, None] * st["grad"]
        new = sub.state(c_new)
        reject = active & sub.rejects(st, new)
        accept = active & ~reject
        step = torch.where(reject, 0.5 * step, step)
        rejected += reject
        streak = torch.where(accept, streak + 1, 0)
        c = torch.where(accept[:, None], c_new, c)
        t = torch.where(accept, t + h, t)
        steps += accept
        grow = accept & (streak >= grow_after) & (step < dtau)
        step = torch.where(grow, torch.clamp(2.0 * step, max=dtau), step)
        streak = torch.where(grow, 0, streak)
        if bool(accept.all()):
            st = new
        elif bool(accept.any()):
            st = {key: _where(accept, new[key], old) for key, old in st.items()}
        checkpoint = False
        if times is not None:  # the host follows t; a checkpoint when a time is passed
            now = passed[:]
            for i, x in zip(rows.tolist(), t.tolist()):
                now[i] = bisect.bisect_right(times[i], x)
            if now != passed:
                record(st)
                passed, last, checkpoint = now, it, True
        elif it % check_every == 0:
            record(st)
            last, checkpoint = it, True
        if checkpoint:
            going = t < t_end
            if not bool(going.any()):
                break
            # bmm of a batch of one takes another path (other bits): keep two rows
            keep = going.clone()
            keep[torch.nonzero(~going).squeeze(1)[: max(0, 2 - int(going.sum()))]] = (
                True
            )
            if not bool(keep.all()):
                finish()
                keep = torch.nonzero(keep).squeeze(1)
                rows, sub = rows[keep], sub.subset(keep)
                c, t, t0, step = c[keep], t[keep], t0[keep], step[keep]
                steps, rejected, streak = steps[keep], rejected[keep], streak[keep]
                st = {key: x[keep] for key, x in st.items()}
    else:
        if on_max_steps == "raise":
            raise RuntimeError(f"batched_gradient_flow: {max_steps} iterations reached")
        if last != max_steps:
            record(st)
    finish()
    return _paths(
        batch,
        p0s,
        marks,
        full["steps"],
        full["rejected"],
        full["step"],
        selected,
        times,
    )


def _paths(batch, p0s, marks, steps, rejected, step, selected, times) -> list[FlowPath]:
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
        out.append(
            FlowPath(
                t=ts[keep, i],
                p=p,
                loss=losses[keep, i],
                selected_mass=masses[keep, i, :n_i]
                if selected[i] is not None
                else np.zeros((0, n_i)),
                steps=int(steps[i]),
                rejected=int(rejected[i]),
                final_dtau=float(step[i]),
                grad_along=alongs[keep, i] if bool(batch.Eq[i].any()) else np.zeros(0),
            )
        )
    return out


def one_step_flows(
    instances: Sequence[object],
    dim: int,
    eta: float,
    *,
    seed0: int,
    log_t_max: float,
    selected: Sequence[object] | None = None,
    directions: Sequence[torch.Tensor | None] | None = None,
    device: torch.device | str | None = None,
) -> tuple[list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]], list[FlowPath]]:
    """For every data set of ``instances`` (anything with ``.counts`` and ``.labels``),
    the setting ``(E1, v, p0)`` of :func:`~attnbook.theory.flow_analysis.
    one_step_problem` drawn with seed ``seed0 + i``, and the gradient flows of all of
    them, integrated together by :func:`batched_gradient_flow` (``selected`` and
    ``directions`` as there)."""
    settings = [
        one_step_problem(inst, dim, eta, seed=seed0 + i, device=device)
        for i, inst in enumerate(instances)
    ]
    problems = [
        (E1, v, inst.counts, inst.labels, p0)
        for (E1, v, p0), inst in zip(settings, instances)
    ]
    paths = batched_gradient_flow(
        problems, log_t_max=log_t_max, selected=selected, directions=directions
    )
    return settings, paths
