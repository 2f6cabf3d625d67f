"""What a flow path says (attention on a selection, the selection a limit makes, the
value gap, statistics against the max-margin direction) and the setting of the theorem:
one step from a seeded initialization, then the flow."""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np
import torch

from attnbook.engine.counts import as_token_counts
from attnbook.models.parameters import init_parameters
from attnbook.theory.flow import (
    FlowPath,
    FlowProblem,
    batched_gradient_flow,
    finite_number,
)
from attnbook.theory.one_step import one_gradient_step
from attnbook.theory.selections import selection_gaps, selection_sets
from attnbook.validation import as_signed_labels

__all__ = [
    "selected_mass",
    "unselected_mass",
    "limit_selection",
    "OneStepSetting",
    "one_step_setting",
    "one_step_problem",
    "one_step_flows",
    "value_gap",
    "path_summary",
    "pair_derivatives",
]


def _attention_problem(E: torch.Tensor, sequences: object) -> FlowProblem:
    """A flow problem on ``sequences`` with a zero head: only its attention is used."""
    counts = as_token_counts(sequences, E.shape[0]).to(E.device)
    zero = torch.zeros(E.shape[1], dtype=E.dtype, device=E.device)
    return FlowProblem(E, zero, counts, np.ones(counts.n_sequences))


def selected_mass(
    E: torch.Tensor, p: torch.Tensor, sequences: object, selected: object
) -> np.ndarray:
    """Per sequence, the total attention mass on the tokens of ``selected[i]``."""
    problem = _attention_problem(E, sequences)
    return problem.per_sequence(problem.attention(p) * problem.selection_mask(selected))


def unselected_mass(
    E: torch.Tensor, p: torch.Tensor, sequences: object, selected: object
) -> np.ndarray:
    """Per sequence, the attention mass on the tokens *not* in ``selected[i]``, summed
    from the small terms (exact at ``1e-30``, where ``1 - selected_mass`` is zero)."""
    problem = _attention_problem(E, sequences)
    return problem.per_sequence(
        problem.attention(p) * ~problem.selection_mask(selected)
    )


def limit_selection(
    E: torch.Tensor, p: torch.Tensor, sequences: object, threshold: float = 1e-6
) -> list[np.ndarray]:
    """Per sequence, the tokens whose attention mass at ``p`` is at least
    ``threshold`` (at the end of a long flow: the tokens the limit selects)."""
    problem = _attention_problem(E, sequences)
    pi = problem.attention(p).cpu().numpy()
    indptr = problem.counts.indptr.cpu().numpy()
    toks = problem.tok.cpu().numpy()
    return [toks[a:b][pi[a:b] >= threshold] for a, b in zip(indptr[:-1], indptr[1:])]


class OneStepSetting(NamedTuple):
    """The embeddings before (``E0``) and after (``E1``) the step, the head ``v`` and
    the initial ``<cls>`` vector ``p0``."""

    E0: torch.Tensor
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
    """The setting of the implicit-bias theorem for one seed: ``E0 ~ N(0, embed_scale^2
    / dim)``, ``p0 ~ N(0, cls_scale^2 / dim)``, ``v ~ N(0, 1 / dim)`` (drawn at unit
    scale and multiplied: one seed, the same directions at every scale), then one
    gradient step of size ``eta`` on ``E`` alone on ``data``."""
    for name, value in (("embed_scale", embed_scale), ("cls_scale", cls_scale)):
        if not (finite_number(value) and value >= 0):
            raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    counts = data.counts
    gen = torch.Generator().manual_seed(int(seed))
    common = dict(scale=1.0, generator=gen, dtype=torch.float64, device=device)
    params = init_parameters(counts.vocab_size, dim, names=("E",), **common)
    params.update(init_parameters(counts.vocab_size, dim, names=("p", "v"), **common))
    params = {k: t.detach() for k, t in params.items()}
    params["E"] = params["E"] * embed_scale
    params["p"] = params["p"] * cls_scale
    E1 = one_gradient_step(params, counts, data.labels, eta)
    return OneStepSetting(params["E"], E1.detach(), params["v"], params["p"])


def one_step_problem(
    data: object,
    dim: int,
    eta: float,
    *,
    seed: int,
    embed_scale: float = 1.0,
    cls_scale: float = 1.0,
    device: torch.device | str | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(E1, v, p0)`` of :func:`one_step_setting`."""
    s = one_step_setting(
        data,
        dim,
        eta,
        seed=seed,
        embed_scale=embed_scale,
        cls_scale=cls_scale,
        device=device,
    )
    return s.E1, s.v, s.p0


def value_gap(
    E: torch.Tensor,
    v: torch.Tensor,
    sequences: object,
    labels: object,
    selected: object,
) -> np.ndarray:
    """Per sequence, ``min_{a in S_i} y_i b_a - max_{s not in S_i} y_i b_s`` (``b = E
    v``): positive everywhere when the selected tokens are the loss-optimal ones."""
    counts = as_token_counts(sequences, E.shape[0])
    y = as_signed_labels(labels, counts.n_sequences).numpy()
    sets = selection_sets(selected, counts.n_sequences)
    b = (E.detach() @ v.detach()).double().cpu().numpy()
    return selection_gaps(b, counts, sets, signs=y)


def path_summary(
    path: FlowPath, p_mm: torch.Tensor | np.ndarray, late_from: float
) -> dict[str, float]:
    """Statistics of a flow path against the max-margin direction ``p_mm`` over its
    late checkpoints (``log t >= late_from``): ``cos_end``, ``max_rel_increase`` of
    ``1 - cos``, ``slope_ratio`` (slope of ``||p||`` in ``log t`` over ``||p_mm||``),
    ``angle_exponent`` (``1 - cos ~ (log t)^-k``), ``min_mass``, ``min_grad_along``."""
    q = p_mm.detach().cpu().double() if isinstance(p_mm, torch.Tensor) else p_mm
    q = np.asarray(q, dtype=float)
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


def pair_derivatives(
    scores: object, values: object, counts: object, label: int, a: int, a2: int
) -> dict[str, float]:
    """The derivative of ``y f`` for one sequence (distinct tokens' ``scores``,
    ``values``, ``counts``) along the move raising ``a_a`` and lowering ``a_a2``:
    ``autograd``, ``general`` closed form, ``two_token`` form, and ``other_mass``."""
    s = torch.as_tensor(np.asarray(scores, dtype=np.float64)).requires_grad_(True)
    b = torch.as_tensor(np.asarray(values, dtype=np.float64))
    n = torch.as_tensor(np.asarray(counts, dtype=np.float64))
    if not (s.ndim == 1 and s.shape == b.shape == n.shape and (n > 0).all()):
        raise ValueError("scores, values and counts must be 1-D, equal, counts > 0")
    if a == a2 or not (0 <= a < s.numel() and 0 <= a2 < s.numel()):
        raise ValueError(f"a and a2 must be two distinct indices, got {a}, {a2}")
    if label not in (-1, 1):
        raise ValueError(f"label must be -1 or +1, got {label!r}")
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
    directions: Sequence[torch.Tensor | None] | None = None,
    device: torch.device | str | None = None,
) -> tuple[list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]], list[FlowPath]]:
    """For every data set of ``instances``, :func:`one_step_problem` drawn with seed
    ``seed0 + i``, and the flows of all of them as one batch."""
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
