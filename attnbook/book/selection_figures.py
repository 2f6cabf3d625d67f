"""The figures of the chapters on the implicit bias of the class token."""

from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from attnbook.book.plotting import PALETTE


def _curves(paths: Sequence, solutions: Sequence) -> pd.DataFrame:
    frames = []
    for seed, (path, sol) in enumerate(zip(paths, solutions)):
        keep = path.t > 0
        columns = {"seed": seed, "log t": np.log(path.t[keep])}
        columns["norm ratio"] = path.norms[keep] / np.linalg.norm(sol.p)
        frames.append(
            pd.DataFrame(columns | {"1 - cos": 1 - path.cosines(sol.p)[keep]})
        )
    return pd.concat(frames)


def growth_and_angle(
    paths: Sequence, solutions: Sequence, log_t_max: float, late_from: float
):
    """``||p(t)|| / ||p_mm||`` against ``log t`` and ``1 - cos(p(t), p_mm)`` with the
    rates ``(log t)^-2``, ``(log t)^-1.47``."""
    curves = _curves(paths, solutions)
    fig, axes = plt.subplots(1, 2, figsize=(8.5, 3.8))
    lines = dict(units="seed", estimator=None, lw=0.8, alpha=0.6)
    norm = dict(x="log t", y="norm ratio", color=PALETTE["positive"], ax=axes[0])
    sns.lineplot(data=curves, **norm, **lines)
    grid = np.linspace(0, log_t_max, 2)
    late = curves[curves["log t"] > late_from]
    offset = (late["norm ratio"] - late["log t"]).median()
    axes[0].plot(grid, grid + offset, ls="--", color=PALETTE["theory"], label="slope 1")
    axes[0].set_ylabel(r"$\|p(t)\| \,/\, \|p_{mm}\|$")
    axes[0].legend()
    late_curves = curves[curves["log t"] >= 1.0]
    angle = dict(x="log t", y="1 - cos", color=PALETTE["negative"], ax=axes[1])
    sns.lineplot(data=late_curves, **angle, **lines)
    near = (late_curves["log t"] - late_from).abs() < 0.26
    anchor = late_curves.loc[near, "1 - cos"].median()
    lt = np.linspace(late_from / 2, log_t_max, 50)
    for k, style in ((2, "--"), (1.47, ":")):
        rate = anchor * (lt / late_from) ** -k
        axes[1].plot(lt, rate, ls=style, color=PALETTE["theory"], label=f"slope -{k:g}")
    axes[1].axvspan(late_from, log_t_max, color=PALETTE["neutral"], alpha=0.15)
    axes[1].set(xscale="log", yscale="log", ylabel=r"$1 - \cos(p(t), p_{mm})$")
    axes[1].set_xticks([1, 2, 5, 10, 20, 50], labels=["1", "2", "5", "10", "20", "50"])
    axes[1].xaxis.set_minor_formatter(plt.NullFormatter())
    axes[1].legend()
    return fig


def path_planes(paths: Sequence, solutions: Sequence):
    """The paths in the plane (along ``p_mm``, distance from its axis) by ``log t``,
    and normalised on the unit circle."""
    fig, axes = plt.subplots(1, 2, figsize=(8.5, 4), layout="constrained")
    for path, sol in zip(paths, solutions):
        unit = sol.p / np.linalg.norm(sol.p)
        along = path.p @ unit
        across = np.linalg.norm(path.p - np.outer(along, unit), axis=1)
        log_t = np.log(np.maximum(path.t, path.t[1]))
        points = axes[0].scatter(along, across, c=log_t, cmap="viridis", s=6)
        axes[0].plot(along, across, color=PALETTE["neutral"], lw=0.5)
        norms = path.norms
        axes[1].scatter(along / norms, across / norms, c=log_t, cmap="viridis", s=6)
    theta = np.linspace(0, np.pi / 2, 100)
    axes[1].plot(np.cos(theta), np.sin(theta), color=PALETTE["neutral"], lw=0.8)
    star = dict(marker="*", s=200, color=PALETTE["theory"], zorder=5)
    axes[1].scatter([1], [0], label=r"$p_{mm}$", **star)
    axes[0].set(xlabel=r"$p \cdot \hat p_{mm}$", ylabel=r"$\|p_\perp\|$")
    axes[1].set(xlabel=r"$\cos$", ylabel=r"$\sin$", aspect="equal")
    axes[1].legend(loc="upper right")
    fig.colorbar(points, ax=axes[1], label=r"$\log t$")
    return fig


_STYLE = {
    "selects": dict(marker="o", color=PALETTE["positive"]),
    "collapses": dict(marker="X", color=PALETTE["negative"]),
    "loses part": dict(marker="D", color=PALETTE["theory"]),
    "undecided": dict(marker="s", color=PALETTE["neutral"]),
}


def regime_map(
    regime: pd.DataFrame,
    shown: pd.DataFrame,
    *,
    b_c: float,
    ratio_constant: float,
    band: float,
    ratios: Sequence[float],
    seed0: int,
):
    """The outcome of every run against ``B`` and ``r`` with the boundary ``Q = 1``
    (open markers: value gap below the irrelevant spread); ``shown`` against ``Q``."""
    fig, axes = plt.subplots(1, 2, figsize=(8.5, 4.6), layout="constrained")
    ax = axes[0]
    lift = np.where(regime["main"], 1.0, 1.12)  # slices drawn just above their ratio
    for outcome, kw in _STYLE.items():
        for hyp, fill in ((True, kw["color"]), (False, "none")):
            part = (regime["outcome"] == outcome) & (regime["hypothesis"] == hyp)
            y = regime.loc[part, "ratio_scale"] * lift[part]
            style = dict(s=22, marker=kw["marker"], facecolors=fill, linewidths=0.8)
            style |= dict(edgecolors=kw["color"], label=outcome if hyp else None)
            ax.scatter(regime.loc[part, "value"], y, **style)
    r_line = np.geomspace(1.6, 11, 100)
    boundary = b_c * (1 - ratio_constant / r_line)
    ax.plot(boundary, r_line, color=PALETTE["theory"], label="boundary Q = 1")
    limit = dict(ls="--", lw=0.8, label=r"$B_c(T)$, $r\to\infty$")
    ax.axvline(b_c, color=PALETTE["theory"], **limit)
    ax.axhline(1.4, ls=":", color=PALETTE["neutral"], lw=0.8)
    ax.set(xlabel="value B of the relevant tokens", yscale="log")
    ax.set(ylabel="ratio r (moved / random part)", title="outcome of every run")
    ax.set_yticks(ratios, labels=[f"{r:g}" for r in ratios])
    ax.yaxis.set_minor_formatter(plt.NullFormatter())
    ax = axes[1]
    level = {"collapses": 0.0, "loses part": 0.35, "undecided": 0.5, "selects": 1.0}
    height = np.array([level[o] for o in shown["outcome"]])
    height += (shown["seed"].to_numpy() - seed0 - 1) * 0.06
    height += np.where(shown["main"], 0.0, 0.2)  # slices above the main grid
    for outcome, kw in _STYLE.items():
        part = (shown["outcome"] == outcome).to_numpy()
        ax.scatter(shown.loc[part, "Q"], height[part], s=22, **kw)
    ax.axvspan(1 - band, 1 + band, color=PALETTE["neutral"], alpha=0.2, lw=0)
    ax.axvline(1.0, color=PALETTE["theory"], lw=0.8)
    ax.set_yticks([0.05, 1.05], labels=["collapses", "selects"])
    ax.set(xlabel=r"$Q = B/B_c(T) + c/r$", title="runs with r ≥ 2 against Q")
    fig.legend(loc="outside lower center", ncols=5, fontsize=8)
    return fig
