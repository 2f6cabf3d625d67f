"""The max-margin token-selection problem and its solution.

Given frozen embeddings ``E`` and, for every sequence ``X_i``, a set ``S_i`` of
*selected* tokens of ``X_i``, the max-margin problem is the hard-margin SVM

    p_mm = argmin ||p||^2 / 2   s.t.   p . (E_a - E_s) >= 1   for every i, a in S_i, s
    in X_i \\ S_i.

Each constraint says that the ``<cls>`` score of a selected token beats the score of a
non-selected token of the same sequence by a margin of one. With one selected token per
sequence this is the problem of the implicit-bias theorem. The problem is a convex
quadratic program; it is solved here with cvxpy and the Clarabel interior-point solver
(Diamond and Boyd, 2016). Its dual variables ``lambda >= 0`` satisfy the KKT conditions

- primal feasibility: ``D p >= 1`` (``D`` stacks the differences ``E_a - E_s`` as rows);
- dual feasibility: ``lambda >= 0``;
- complementary slackness: ``lambda_k (D_k . p - 1) = 0``;
- stationarity: ``p = D^T lambda = sum_k lambda_k (E_a - E_s)``;

which :func:`kkt_residuals` measures.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch

from attnbook.engine.counts import TokenCounts, as_token_counts

__all__ = [
    "MaxMarginSolution",
    "selection_sets",
    "selection_constraints",
    "max_margin_solution",
    "max_margin_direction",
    "kkt_residuals",
    "selection_gaps",
    "selection_margins",
]


def selection_sets(selected: object, n: int) -> list[frozenset[int]]:
    """``selected`` (one token id, or a collection of ids, per sequence) as ``n`` sets
    of ints.

    Raises ``ValueError`` when the length is not ``n`` or an entry is empty or not
    integer.
    """
    if isinstance(selected, torch.Tensor):
        selected = selected.detach().cpu().numpy()
    if isinstance(selected, (str, bytes)) or not isinstance(selected, Iterable):
        raise ValueError(
            "selected must hold one token id or a collection of ids per sequence"
        )
    items = list(selected)
    if len(items) != n:
        raise ValueError(
            f"selected has {len(items)} entries for {n} sequences: lengths must match"
        )
    out = []
    for i, item in enumerate(items):
        if isinstance(item, torch.Tensor):
            item = item.detach().cpu().numpy()
        elif isinstance(item, (set, frozenset)):
            item = sorted(item)
        ids = np.atleast_1d(np.asarray(item))
        if ids.size == 0:
            raise ValueError(
                f"selected[{i}] is empty: every sequence must select a token"
            )
        if ids.dtype == object or not np.issubdtype(ids.dtype, np.integer):
            raise ValueError(
                f"selected[{i}] must be integer token ids, got dtype {ids.dtype}"
            )
        out.append(frozenset(int(s) for s in ids.ravel()))
    return out


def selection_constraints(
    counts: TokenCounts, selected: object
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct constraints ``(a, s)`` of the max-margin problem.

    Returns ``(winners, losers, rows)``: int arrays with one entry per distinct pair
    ``(a, s)`` (a selected token ``a`` that must beat a non-selected token ``s`` of a
    common sequence), and for each pair the first sequence it comes from.
    """
    n = counts.n_sequences
    sets = selection_sets(selected, n)
    indptr = counts.indptr.cpu().numpy()
    toks = counts.token_ids.cpu().numpy()
    pairs: dict[tuple[int, int], int] = {}
    for i in range(n):
        present = toks[indptr[i] : indptr[i + 1]]
        missing = sets[i] - set(present.tolist())
        if missing:
            raise ValueError(
                f"selected[{i}] holds token(s) {sorted(missing)} that do not occur in "
                f"sequence {i}"
            )
        losers = [int(s) for s in present if int(s) not in sets[i]]
        for a in sorted(sets[i]):
            for s in losers:
                pairs.setdefault((a, s), i)
    if not pairs:
        raise ValueError(
            "no constraint: every sequence selects all of its tokens, so there is "
            "nothing to separate"
        )
    keys = np.array(list(pairs.keys()), dtype=np.int64)
    return (
        keys[:, 0],
        keys[:, 1],
        np.fromiter(pairs.values(), dtype=np.int64, count=len(pairs)),
    )


@dataclass(frozen=True)
class MaxMarginSolution:
    """The solution of the max-margin problem and what is needed to check it.

    Attributes
    ----------
    p:
        ``(d,)`` float64 numpy array, the minimiser ``p_mm``.
    dual:
        ``(m,)`` the multipliers ``lambda`` of the ``m`` distinct constraints.
    differences:
        ``(m, d)`` the constraint rows ``E_a - E_s``.
    winners, losers, rows:
        for each constraint, the selected token, the non-selected token and a sequence
        where they meet.
    status:
        the solver's status string.
    """

    p: np.ndarray
    dual: np.ndarray
    differences: np.ndarray
    winners: np.ndarray
    losers: np.ndarray
    rows: np.ndarray
    status: str

    @property
    def margins(self) -> np.ndarray:
        """``D p``: the score gap of every constraint (all >= 1 up to solver
        tolerance)."""
        return self.differences @ self.p

    @property
    def support(self) -> np.ndarray:
        """Boolean mask of the constraints with a positive multiplier (support
        vectors)."""
        return self.dual > 1e-6 * max(float(self.dual.max()), 1e-300)


def max_margin_solution(
    E: torch.Tensor | np.ndarray, sequences: object, selected: object
) -> MaxMarginSolution:
    """Solve the max-margin problem with cvxpy + Clarabel and return primal and dual
    solution.

    ``sequences`` is a list of token-id sequences or a :class:`TokenCounts`;
    ``selected[i]`` is a token id or a collection of token ids of sequence ``i`` (each
    of them must beat every other token of the sequence). Raises ``ValueError`` when the
    selection cannot be separated by any ``p`` (the problem is infeasible) or when the
    input is malformed.
    """
    import cvxpy as cp

    E_np = (
        E.detach().cpu().double().numpy()
        if isinstance(E, torch.Tensor)
        else np.asarray(E, float)
    )
    if E_np.ndim != 2:
        raise ValueError(f"E must have shape (V, d), got {E_np.shape}")
    counts = as_token_counts(sequences, E_np.shape[0])
    winners, losers, rows = selection_constraints(counts, selected)
    D = E_np[winners] - E_np[losers]
    zero = np.flatnonzero(np.abs(D).max(axis=1) == 0)
    if zero.size:
        k = int(zero[0])
        raise ValueError(
            f"infeasible selection: tokens {winners[k]} and {losers[k]} have "
            "identical embeddings, "
            f"so {winners[k]} cannot beat {losers[k]} in sequence {rows[k]}"
        )
    p = cp.Variable(E_np.shape[1])
    constraint = D @ p >= 1
    problem = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(p)), [constraint])
    try:
        problem.solve(solver=cp.CLARABEL)
    except (
        cp.error.SolverError
    ) as err:  # pragma: no cover - solver failure, not infeasibility
        raise ValueError(
            f"the QP solver failed on the max-margin problem: {err}"
        ) from err
    if problem.status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
        raise ValueError(
            "infeasible selection: no p gives every selected token a higher score "
            "than every "
            "non-selected token of its sequence (the selection is not linearly "
            "separable)"
        )
    if problem.status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) or p.value is None:
        raise ValueError(
            f"the max-margin problem was not solved (status {problem.status})"
        )
    p_val = np.asarray(p.value, dtype=float)
    dual = np.maximum(np.asarray(constraint.dual_value, dtype=float).ravel(), 0.0)
    p_val, dual = _polish(D, p_val, dual)
    return MaxMarginSolution(
        p=p_val,
        dual=dual,
        differences=D,
        winners=winners,
        losers=losers,
        rows=rows,
        status=str(problem.status),
    )


def _polish(
    D: np.ndarray, p: np.ndarray, dual: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Refine an interior-point solution on its active set.

    Interior-point solvers stop at a duality gap of about ``1e-8``; on degenerate
    problems (an active constraint with a zero multiplier) that leaves ``p`` accurate to
    only ``~1e-4``. With the active set ``A`` (margins within ``1e-5`` of one) known,
    the KKT system reduces to ``D_A D_A^T lambda_A = 1``, ``p = D_A^T lambda_A``, solved
    here by least squares. The refined pair is kept when it is primal and dual feasible
    to ``1e-9``, otherwise the solver's answer is.
    """
    active = np.flatnonzero(D @ p <= 1 + 1e-5)
    if active.size == 0:
        return p, dual
    DA = D[active]
    lam_a, *_ = np.linalg.lstsq(DA @ DA.T, np.ones(active.size), rcond=None)
    p_new = DA.T @ lam_a
    if lam_a.min() >= -1e-9 and (D @ p_new).min() >= 1 - 1e-9:
        new_dual = np.zeros_like(dual)
        new_dual[active] = np.maximum(lam_a, 0.0)
        return p_new, new_dual
    return p, dual


def max_margin_direction(
    E: torch.Tensor, sequences: object, selected: object
) -> torch.Tensor:
    """``p_mm`` of the max-margin problem (see the module docstring), as a ``(d,)``
    tensor.

    The result has ``E``'s dtype and device. ``selected[i]`` is the token id, or a
    collection of token ids, that sequence ``i`` must select. Raises ``ValueError`` when
    no ``p`` separates the selection.
    """
    sol = max_margin_solution(E, sequences, selected)
    if isinstance(E, torch.Tensor):
        return torch.as_tensor(sol.p, dtype=E.dtype, device=E.device)
    return torch.as_tensor(sol.p, dtype=torch.float64)


def kkt_residuals(solution: MaxMarginSolution) -> dict[str, float]:
    """The four KKT residuals of a max-margin solution, relative to ``||p||``:

    ``primal`` = max(0, max_k (1 - D_k.p)); ``dual`` = max(0, -min lambda) (zero by
    construction after clipping; the raw solver values are clipped at tolerance level);
    ``complementary`` = max_k |lambda_k (D_k.p - 1)|; ``stationarity`` = ||p - D^T
    lambda|| / ||p||.
    """
    margins = solution.margins
    scale = max(float(np.linalg.norm(solution.p)), 1e-300)
    return {
        "primal": float(max(0.0, (1.0 - margins).max())),
        "dual": float(max(0.0, -solution.dual.min())),
        "complementary": float(np.abs(solution.dual * (margins - 1.0)).max()),
        "stationarity": float(
            np.linalg.norm(solution.p - solution.differences.T @ solution.dual) / scale
        ),
    }


def selection_gaps(
    scores: np.ndarray,
    counts: TokenCounts,
    sets: list[frozenset[int]],
    signs: np.ndarray | None = None,
) -> np.ndarray:
    """Per sequence ``i``, ``min_{a in S_i} c_i scores_a - max_{s in X_i, s not in S_i}
    c_i scores_s`` with ``c_i = signs[i]`` (1 when ``signs`` is None); ``+inf`` when
    ``X_i`` holds no other token."""
    indptr = counts.indptr.cpu().numpy()
    toks = counts.token_ids.cpu().numpy()
    out = np.full(counts.n_sequences, np.inf)
    for i in range(counts.n_sequences):
        present = toks[indptr[i] : indptr[i + 1]]
        sel = np.array(sorted(sets[i]), dtype=np.int64)
        rest = np.array([s for s in present if int(s) not in sets[i]], dtype=np.int64)
        if rest.size:
            c = 1.0 if signs is None else signs[i]
            out[i] = (c * scores[sel]).min() - (c * scores[rest]).max()
    return out


def selection_margins(
    E: torch.Tensor, p: torch.Tensor, sequences: object, selected: object
) -> np.ndarray:
    """Per sequence, the smallest score gap ``p.(E_a - E_s)`` over selected ``a`` and
    non-selected ``s`` (``+inf`` when the sequence selects all its tokens)."""
    counts = as_token_counts(sequences, E.shape[0])
    sets = selection_sets(selected, counts.n_sequences)
    scores = (E.detach() @ p.detach()).double().cpu().numpy()
    return selection_gaps(scores, counts, sets)
