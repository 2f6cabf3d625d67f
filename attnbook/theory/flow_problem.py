"""The data of a gradient flow on the ``<cls>`` vector ``p`` (``E`` and ``v`` frozen)
and the path it records.

:class:`FlowProblem` holds the frozen data (float64 on ``E``'s device) and gives the
attention of every stored entry at any ``p``; :class:`FlowPath` is the recorded path;
:func:`default_t0` the first step of the log-time integrator
(:mod:`attnbook.theory.flow_batch`), and :data:`ROUNDING_FLOOR` its acceptance margin.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field

import numpy as np
import torch

from attnbook.engine.counts import TokenCounts, as_token_counts
from attnbook.engine.segments import row_shift, segment_sum
from attnbook.theory.selections import selection_sets
from attnbook.validation import as_signed_labels

#: A step is rejected when the loss rises by more than this many units of float64
#: rounding (2^-53) of the terms ``pi_s |b_s - b_{r_i}|`` whose sums give the change of
#: every output: below that, the sign of the change is rounding noise. Without it the
#: integrator halves its step for ever at a stationary point whose gradient is pure
#: rounding (a symmetric saddle).
ROUNDING_FLOOR = 8 * 2.0**-53

__all__ = [
    "FlowProblem",
    "FlowPath",
    "default_t0",
    "finite_number",
    "ROUNDING_FLOOR",
    "direction_cosines",
]


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

    def attention(self, p: torch.Tensor) -> torch.Tensor:
        """Attention mass of every stored entry at ``p`` (stable at any ``||p||``)."""
        p = p.detach().to(device=self.device, dtype=torch.float64)
        a_tok = (self.E @ p)[self.tok]
        w = self.cnt * row_shift(a_tok, self.rows, self.n)[1]
        return w / segment_sum(w, self.rows, self.n)[self.rows]

    def positions(self) -> torch.Tensor:
        """``(nnz,)`` the position of every stored entry within its sequence."""
        entry = torch.arange(self.tok.numel(), device=self.device)
        return entry - self.counts.indptr.to(self.device)[self.rows]

    def padded(
        self, mask: torch.Tensor | None, m: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Token ids, counts and selection flags (``mask``, one per stored entry) in an
        ``(n, m)`` layout (padding: token 0 with count 0)."""
        n, pos, f64 = self.n, self.positions(), torch.float64
        tok = torch.zeros(n, m, dtype=torch.int64, device=self.device)
        cnt = torch.zeros(n, m, dtype=f64, device=self.device)
        sel = torch.zeros(n, m, dtype=f64, device=self.device)
        tok[self.rows, pos] = self.tok
        cnt[self.rows, pos] = self.cnt
        if mask is not None:
            sel[self.rows, pos] = mask.to(f64)
        return tok, cnt, sel

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
    """The recorded path of a gradient flow, at its checkpoints.

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
