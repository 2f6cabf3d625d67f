"""The flow on ``p`` reduced to one coordinate in the value-only limit (``E0 = 0``):
on data built in pairs the loss depends only on the score gap ``u`` of the positive
relevant tokens, ``phi_B(u) = [l(B pi(u)) + l(B pi(-u))] / 2`` with ``pi(u) = 1 / (1
+ (T - 1) e^{-u})`` and ``l(z) = log(1 + e^{-z})``; below ``B_c(T)``
(:func:`collapse_threshold`) it decreases on all of ``u > 0`` and the flow abandons a
class."""

from __future__ import annotations

import numpy as np
from scipy.special import expit

__all__ = [
    "reduced_loss",
    "reduced_slope",
    "collapse_threshold",
    "reduced_rest_point",
    "rest_point_mass",
    "reduced_flow",
]


def _attention(u: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray]:
    """``pi(u)`` and ``pi(u) (1 - pi(u))``, both to full relative precision."""
    shift = np.log(length - 1.0)
    pi = expit(u - shift)
    return pi, pi * expit(shift - u)


def _check(value: float, length: int) -> None:
    if not (np.isfinite(value) and value >= 0):
        raise ValueError(f"value must be a finite number >= 0, got {value!r}")
    if not (isinstance(length, (int, np.integer)) and length >= 2):
        raise ValueError(f"length must be an integer >= 2, got {length!r}")


def reduced_loss(u: np.ndarray | float, value: float, length: int) -> np.ndarray:
    """``phi_B(u)``: the loss of a pair of sequences (module docstring) as a function
    of the score gap ``u``, for the value ``B = value`` and the length ``T =
    length``."""
    _check(value, length)
    u = np.asarray(u, dtype=np.float64)
    plus, _ = _attention(u, length)
    minus, _ = _attention(-u, length)
    return 0.5 * (np.logaddexp(0.0, -value * plus) + np.logaddexp(0.0, -value * minus))


def reduced_slope(u: np.ndarray | float, value: float, length: int) -> np.ndarray:
    """``phi_B'(u)``, from the closed form ``B/2 [-s(-B pi(u)) pi'(u) + s(-B pi(-u))
    pi'(-u)]`` (``s`` the logistic function)."""
    _check(value, length)
    u = np.asarray(u, dtype=np.float64)
    plus, dplus = _attention(u, length)
    minus, dminus = _attention(-u, length)
    return (
        0.5 * value * (-expit(-value * plus) * dplus + expit(-value * minus) * dminus)
    )


def _has_rest_point(value: float, length: int, grid: np.ndarray) -> bool:
    """Whether ``phi_B`` rises somewhere on ``grid`` (``u > 0``), that is, has a
    local minimum at a finite ``u``."""
    slope = reduced_slope(grid, value, length)
    return bool((slope > 1e-12 * np.abs(slope).max()).any())


def collapse_threshold(
    length: int, *, u_max: float = 40.0, points: int = 40_001, tol: float = 1e-6
) -> float:
    """``B_c(T)``: the smallest value at which ``phi_B`` stops decreasing on ``(0,
    u_max]``, by bisection on ``B`` (the slope is sampled on ``points`` equally spaced
    ``u``; a rise below ``1e-12`` of the largest slope is rounding)."""
    _check(1.0, length)
    grid = np.linspace(u_max / points, u_max, points)
    lo, hi = 0.0, 1.0
    while not _has_rest_point(hi, length, grid):
        lo, hi = hi, 2.0 * hi
        if hi > 1e6:
            raise RuntimeError("no rest point found up to B = 1e6")
    while hi - lo > tol * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if _has_rest_point(mid, length, grid) else (mid, hi)
    return hi


def reduced_rest_point(value: float, length: int, *, u_max: float = 40.0) -> float:
    """The smallest ``u > 0`` at which ``phi_B`` has a local minimum (``inf`` when it
    decreases on the whole of ``(0, u_max]``): where the reduced flow from a small
    positive ``u(0)`` comes to rest."""
    grid = np.linspace(1e-4, u_max, 400_001)
    slope = reduced_slope(grid, value, length)
    rise = np.flatnonzero(slope > 1e-12 * np.abs(slope).max())
    if rise.size == 0:
        return float("inf")
    k = int(rise[0])
    if k == 0:
        return 0.0
    # the zero of the slope between grid[k-1] (slope <= 0) and grid[k] (slope > 0)
    s0, s1 = slope[k - 1], slope[k]
    return float(grid[k - 1] + (grid[k] - grid[k - 1]) * (-s0) / (s1 - s0))


def rest_point_mass(value: float, length: int) -> float:
    """``pi(-u*)``: the attention a sequence of the losing class keeps on its important
    token at the rest point ``u*`` (zero below ``B_c(T)``)."""
    rest = reduced_rest_point(value, length)
    if not np.isfinite(rest):
        return 0.0
    return float(_attention(np.float64(-rest), length)[0])


def reduced_flow(
    u0: float, value: float, length: int, speed: float, t_end: float
) -> float:
    """``u(t_end)`` for the reduced flow ``du/dt = -speed * phi_B'(u)`` from ``u(0) =
    u0`` (``speed = B^2 / ||v||^2`` for the flow on ``p``), integrated by an implicit
    Runge-Kutta method (Radau, relative tolerance 1e-10) in ``tau = log(1 + t)``."""
    from scipy.integrate import solve_ivp

    _check(value, length)
    if not (np.isfinite(t_end) and t_end > 0):
        raise ValueError(f"t_end must be a positive finite number, got {t_end!r}")

    def rhs(tau, u):
        return -np.exp(tau) * speed * reduced_slope(u, value, length)

    sol = solve_ivp(
        rhs,
        (0.0, float(np.log1p(t_end))),
        [float(u0)],
        method="Radau",
        rtol=1e-10,
        atol=1e-12,
    )
    if not sol.success:
        raise RuntimeError(f"reduced_flow: {sol.message}")
    return float(sol.y[0, -1])
