"""The max-margin selection problem ``p_mm = argmin ||p||^2 / 2`` s.t. ``p . (E_a -
E_s) >= 1`` for selected ``a`` and other ``s`` of every sequence: solved by Clarabel on
unit-row constraints, refined on its active set, infeasible only with a Farkas
certificate."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import torch

from attnbook.engine.counts import TokenCounts, as_token_counts

__all__ = [
    "selection_sets",
    "selection_constraints",
    "MaxMarginSolution",
    "max_margin_solution",
    "kkt_residuals",
]


def selection_sets(selected: object, n: int) -> list[frozenset[int]]:
    """``selected`` (one token id or a collection of ids per sequence) as ``n`` sets."""
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
    """The distinct constraints ``(winners, losers, rows)``: a selected token that must
    beat a non-selected one, and the first sequence holding both."""
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
    """``p_mm``, the multipliers ``dual``, rows ``E_a - E_s`` and tokens of the
    constraints."""

    p: np.ndarray
    dual: np.ndarray
    differences: np.ndarray
    winners: np.ndarray
    losers: np.ndarray

    @property
    def margins(self) -> np.ndarray:
        """``D p``: the score gap of every constraint."""
        return self.differences @ self.p

    @property
    def support(self) -> np.ndarray:
        """The constraints with a positive multiplier (support vectors)."""
        return self.dual > 1e-6 * max(float(self.dual.max()), 1e-300)


def max_margin_solution(
    E: torch.Tensor | np.ndarray, sequences: object, selected: object
) -> MaxMarginSolution:
    """The max-margin solution for ``selected`` (token ids per sequence); ``E -> c E``
    gives ``p -> p / c``. ``ValueError`` for an infeasible selection or bad input."""
    import cvxpy as cp

    E_np = (
        E.detach().cpu().double().numpy()
        if isinstance(E, torch.Tensor)
        else np.asarray(E, float)
    )
    if E_np.ndim != 2:
        raise ValueError(f"E must have shape (V, d), got {E_np.shape}")
    if not np.isfinite(E_np).all():
        raise ValueError("E must be finite: it holds NaN or infinite entries")
    counts = as_token_counts(sequences, E_np.shape[0])
    winners, losers, rows = selection_constraints(counts, selected)
    with np.errstate(over="ignore"):  # checked below
        D = E_np[winners] - E_np[losers]
    zero = np.flatnonzero(np.abs(D).max(axis=1) == 0)
    if zero.size:
        k = int(zero[0])
        raise ValueError(
            f"infeasible selection: tokens {winners[k]} and {losers[k]} have "
            "identical embeddings, "
            f"so {winners[k]} cannot beat {losers[k]} in sequence {rows[k]}"
        )
    if not np.isfinite(D).all():
        raise ValueError("E is too large: differences of its rows overflow float64")
    U, norms, c, unit = _normalised(D)
    q = cp.Variable(E_np.shape[1])
    constraint = U @ q >= c
    problem = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(q)), [constraint])
    try:  # a numerical failure is decided below, never called infeasible
        problem.solve(solver=cp.CLARABEL)
    except cp.error.SolverError:
        pass
    solved = (
        problem.status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) and q.value is not None
    )
    if not solved:
        if _infeasibility_certificate(U) is not None:
            raise ValueError(
                "infeasible selection: no p gives every selected token a higher score "
                "than every non-selected token of its sequence (the selection is not "
                "linearly separable)"
            )
        raise ValueError(
            f"the max-margin problem was not solved (solver status {problem.status}), "
            "although the selection is separable"
        )
    # back to the units of E: p = q / unit, p = D^T lambda, lambda_k = mu_k / (unit r_k)
    p_val = np.asarray(q.value, dtype=float) / unit
    mu = np.maximum(np.asarray(constraint.dual_value, dtype=float).ravel(), 0.0)
    dual = mu / (unit * norms)
    p_val, dual = _refine(D, U, norms, p_val, dual)
    return MaxMarginSolution(p_val, dual, D, winners, losers)


def _normalised(D: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """``D p >= 1`` as ``U q >= c``: ``U = D / r`` (unit rows), ``q = p unit``,
    ``unit = min r``, ``c = unit / r``. Returns ``(U, r, c, unit)``."""
    big = np.abs(D).max()  # the norms without overflow or underflow of squares
    norms = np.linalg.norm(D / big, axis=1) * big
    U = D / norms[:, None]
    unit = float(norms.min())
    return U, norms, unit / norms, unit


def _refine(
    D: np.ndarray,
    U: np.ndarray,
    norms: np.ndarray,
    p: np.ndarray,
    dual: np.ndarray,
    max_steps: int = 100,
) -> tuple[np.ndarray, np.ndarray]:
    """The interior-point solution (``~1e-4`` on degenerate problems) refined on its
    active set, solved exactly; returned if it meets the KKT conditions, else the
    solver's."""

    def margin_tolerance(q: np.ndarray) -> np.ndarray:
        # the rounding of D_k . q (< d eps sum_j |D_kj q_j|), for any d up to 1e6
        return 1e-9 * (1.0 + np.abs(D) @ np.abs(q))

    active = set(np.flatnonzero(D @ p <= 1 + 1e-5).tolist())
    for _ in range(max_steps):
        if not active:
            break
        A = np.array(sorted(active))
        p_new, *_ = np.linalg.lstsq(U[A], 1.0 / norms[A], rcond=None)
        coef, *_ = np.linalg.lstsq(U[A].T, p_new, rcond=None)
        lam = coef / norms[A]  # p = sum_k coef_k U_k = sum_k lam_k D_k
        if lam.min() < -1e-9 * max(float(np.abs(lam).max()), 1e-300):
            active.discard(int(A[int(np.argmin(lam))]))
            continue
        slack = D @ p_new - 1.0
        worst = int(np.argmin(slack + margin_tolerance(p_new)))
        if slack[worst] + margin_tolerance(p_new)[worst] < 0:
            if worst in active:  # cannot be met with this active set
                break
            active.add(worst)
            continue
        if np.linalg.norm(p_new - D[A].T @ lam) > 1e-9 * max(
            np.linalg.norm(p_new), 1e-300
        ):
            break
        new_dual = np.zeros_like(dual)
        new_dual[A] = np.maximum(lam, 0.0)
        return p_new, new_dual
    return p, dual


def _infeasibility_certificate(U: np.ndarray) -> np.ndarray | None:
    """Farkas weights ``z >= 0``, ``sum z = 1``, ``|U^T z| <= 1e-10`` (``D p >= 1`` has
    no solution), by linear programming; ``None`` when none is found."""
    from scipy.optimize import linprog

    m, d = U.shape
    A_eq = np.vstack([U.T, np.ones((1, m))])
    b_eq = np.zeros(d + 1)
    b_eq[d] = 1.0
    found = linprog(np.zeros(m), A_eq=A_eq, b_eq=b_eq, bounds=(0, None), method="highs")
    if found.status != 0 or found.x is None:
        return None
    z = np.maximum(np.asarray(found.x, dtype=float), 0.0)
    support = np.flatnonzero(z > 0)
    exact = np.zeros(m)
    exact[support] = np.linalg.lstsq(A_eq[:, support], b_eq, rcond=None)[0]
    for weights in (exact, z):
        weights = np.maximum(weights, 0.0)
        if weights.sum() > 0:
            weights = weights / weights.sum()
            if np.linalg.norm(U.T @ weights) <= 1e-10:
                return weights
    return None


def kkt_residuals(solution: MaxMarginSolution) -> dict[str, float]:
    """``primal``, ``dual``, ``complementary`` and ``stationarity`` (relative to
    ``||p||``) KKT residuals."""
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
