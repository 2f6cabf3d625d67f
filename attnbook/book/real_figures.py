"""The figures of the real-data chapter; each function returns the figure."""

from __future__ import annotations

from typing import Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from attnbook.book.plotting import PALETTE, plot_binned
from attnbook.experiments.importance import bin_statistics, observed_range
from attnbook.experiments.picture import MAIN_STATISTICS
from attnbook.experiments.robustness import PICTURE_STATISTICS

#: The names of the chapter's corpora, and the two of them its figures show.
NAMES = {"imdb": "IMDB", "yelp": "Yelp (balanced)", "yelp_all": "Yelp (all)"}
DATASETS = ("imdb", "yelp")
#: The two binnings of the importance axis: [-1, 1], and the observed range (paper).
BINNINGS = {"[−1, 1]": None, "[min I, max I] (paper)": "observed"}


def bin_range(importance: np.ndarray, binning: str | None) -> tuple[float, float]:
    """The interval a binning of :data:`BINNINGS` cuts."""
    return (-1.0, 1.0) if binning is None else observed_range(importance)


_IMPORTANCE = r"$P(1\mid s) - P(0\mid s)$"
_SCORES = (r"$E_s \cdot v$", r"$E_s \cdot p$")
_BIN_COLORS = {
    "[−1, 1]": PALETTE["theory"],
    "[min I, max I] (paper)": PALETTE["negative"],
}


def _legend_below(fig, ax, ncol: int, bottom: float) -> None:
    handles, labels = ax.get_legend_handles_labels()
    where = dict(loc="lower center", fontsize=10, frameon=False)
    fig.legend(handles, labels, ncol=ncol, **where)
    # laid out again whenever drawn: after fit_to_column too
    fig.set_layout_engine("tight", rect=(0, bottom, 1, 1))


def picture_figure(
    importance: Mapping[str, np.ndarray],
    runs: Mapping[str, Mapping[tuple[str, int], tuple[np.ndarray, np.ndarray]]],
    seed: int,
):
    """Bin means and sds of both scores (``runs[name]["adam", seed]``, ``(E.v, E.p)``)
    against the importance, in both :data:`BINNINGS`, one row per data set."""
    fig, axes = plt.subplots(2, 2, figsize=(9.0, 6.8))
    for r, name in enumerate(DATASETS):
        imp = importance[name]
        for c, (vals, label) in enumerate(zip(runs[name]["adam", seed], _SCORES)):
            ax = axes[r, c]
            for b, how in BINNINGS.items():
                lo, hi = bin_range(imp, how)
                style = dict(label=b, color=_BIN_COLORS[b], min_count=2)
                plot_binned(ax, imp, vals, lo=lo, hi=hi, **style)
            ax.set_xlim(-1.02, 1.02)
            ax.set_title(f"{NAMES[name]}: {label}", fontsize=11.5)
            ax.set_xlabel(_IMPORTANCE)
    _legend_below(fig, axes[0, 0], 2, 0.06)
    return fig


def bin_counts_figure(importance: Mapping[str, np.ndarray]):
    """Tokens per bin in the two binnings (log scale), one panel per data set."""
    fig, axes = plt.subplots(1, 2, figsize=(9.0, 3.6))
    for ax, name in zip(axes, DATASETS):
        imp = importance[name]
        for b, how in BINNINGS.items():
            lo, hi = bin_range(imp, how)
            counts = bin_statistics(imp, np.zeros(imp.size), 20, lo, hi)
            shown = counts["count"].clip(lower=0.8)
            ax.step(counts["center"], shown, where="mid", label=b, color=_BIN_COLORS[b])
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 3.0), numticks=8))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: f"{y:,.0f}"))
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set(title=NAMES[name], xlabel=_IMPORTANCE, ylabel="tokens per bin")
        ax.title.set_fontsize(11.5)
    _legend_below(fig, axes[0], 2, 0.12)
    return fig


def null_figure(
    tables: Mapping[str, pd.DataFrame],
    nulls: Mapping[str, pd.DataFrame],
    seeds: tuple[int, ...],
):
    """The main rank correlations of every seed (dots) and shuffled-label run
    (crosses); ``tables`` keyed by display name, ``nulls`` by key."""
    fig, axes = plt.subplots(1, 2, figsize=(9.0, 3.8), sharey=True)
    for ax, name in zip(axes, DATASETS):
        t = tables[NAMES[name]]
        for j, key in enumerate(MAIN_STATISTICS):
            col = PICTURE_STATISTICS[key]
            real = t.loc[[f"seed {s}" for s in seeds], col]
            ax.plot([j] * len(real), real, "o", color=PALETTE["theory"], ms=6)
            null = nulls[name][col]
            ax.plot([j] * len(null), null, "x", color=PALETTE["negative"], ms=6)
        ax.axhline(0, color="0.7", lw=0.8)
        ax.set_xticks(range(len(MAIN_STATISTICS)))
        ax.set_xticklabels(["E·v", "E·p", "E·v | df", "E·p | df"], fontsize=10)
        ax.set_title(NAMES[name], fontsize=11.5)
    axes[0].set_ylabel("rank correlation")
    shuffled = f"shuffled labels ({len(nulls[DATASETS[0]])} permutations)"
    handles = [
        Line2D([], [], marker="o", ls="", color=PALETTE["theory"], label="seeds"),
        Line2D([], [], marker="x", ls="", color=PALETTE["negative"], label=shuffled),
    ]
    fig.legend(handles=handles, loc="lower center", ncol=2, fontsize=10, frameon=False)
    fig.set_layout_engine("tight", rect=(0, 0.1, 1, 1))
    return fig


_RUN_STYLE = {
    "one_step": ("0.6", ":"),
    "theorem": (PALETTE["positive"], "--"),
    "gd": (PALETTE["neutral"], "-."),
    "adam": (PALETTE["theory"], "-"),
}


def ablation_figure(
    importance: Mapping[str, np.ndarray],
    scores: Mapping[str, Mapping[tuple[str, int], tuple[np.ndarray, np.ndarray]]],
    seed: int,
    labels: Mapping[str, str],
):
    """Bin means of both scores ``scores[data set][run, seed] = (E.v, E.p)`` over their
    sd: one step, the theorem's setting, gradient descent and Adam (``labels[run]``)."""
    fig, axes = plt.subplots(2, 2, figsize=(9.0, 7.0), sharex=True)
    for r, name in enumerate(DATASETS):
        for key, (color, ls) in _RUN_STYLE.items():
            style = dict(band=False, color=color, label=labels[key], min_count=2)
            for c, vals in enumerate(scores[name][key, seed]):
                plot_binned(axes[r, c], importance[name], vals / vals.std(), **style)
                axes[r, c].lines[-1].set_linestyle(ls)
        for c, label in enumerate(_SCORES):
            axes[r, c].set_title(f"{NAMES[name]}: {label} / its std", fontsize=11.5)
            axes[1, c].set_xlabel(_IMPORTANCE)
    _legend_below(fig, axes[0, 0], 2, 0.09)
    return fig


def synthetic_figure(
    synthetic: Mapping[str, tuple[np.ndarray, tuple[np.ndarray, np.ndarray], object]],
    importance: np.ndarray,
    imdb_scores: tuple[np.ndarray, np.ndarray],
):
    """Bin means of both scores ``(E.v, E.p)`` over their sd: the synthetic samples
    (``synthetic[label] = (importance, scores, ...)``) beside IMDB's."""
    drawn, conditioned = synthetic["as drawn"], synthetic["conditioned on Assumption 1"]
    pos, neg = PALETTE["positive"], PALETTE["negative"]
    series = {
        "synthetic, as drawn": (drawn[0], drawn[1], pos),
        "synthetic, conditioned": (conditioned[0], conditioned[1], neg),
        "IMDB": (importance, imdb_scores, PALETTE["theory"]),
    }
    fig, axes = plt.subplots(1, 2, figsize=(9.0, 3.9))
    for label, (imp, scores, color) in series.items():
        keep = np.isfinite(imp)
        for ax, vals in zip(axes, scores):
            shown = vals[keep] / vals[keep].std()
            plot_binned(ax, imp[keep], shown, label=label, color=color, min_count=2)
    for ax, name in zip(axes, _SCORES):
        ax.set_title(f"{name} / its std", fontsize=11.5)
        ax.set_xlabel(_IMPORTANCE)
    _legend_below(fig, axes[0], 3, 0.1)
    return fig
