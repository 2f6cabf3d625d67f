"""The figures and styled tables of the chapter on the paper's protocol."""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from attnbook.book.plotting import PALETTE
from attnbook.experiments.curves import ABLATIONS, SPREAD_READINGS
from attnbook.experiments.protocol_runs import (
    PAPER_ACCURACY_LOSS,
    PAPER_SPREAD_RATIO,
    ProtocolRuns,
)
from attnbook.experiments.robustness import PICTURE_STATISTICS

_MODEL_COLORS = {
    "full": PALETTE["theory"],
    "random_E": PALETTE["negative"],
    "one_step_head": PALETTE["positive"],
}


def _legend(fig, handles: list, ncol: int, bottom: float) -> None:
    fig.legend(
        handles=handles, loc="lower center", ncol=ncol, fontsize=10, frameon=False
    )
    # laid out again whenever drawn: after fit_to_column too
    fig.set_layout_engine("tight", rect=(0, bottom, 1, 1))


def curve_figure(runs: ProtocolRuns, name: str, title: str, labels: Sequence[str]):
    """Accuracy and loss (training split solid, test dashed) of the three models along
    the budget of each dynamics label (first seed), with the paper's numbers dotted."""
    fig, axes = plt.subplots(2, 2, figsize=(9.0, 7.0), sharex="col")
    for c, label in enumerate(labels):
        for r, metric in enumerate(("accuracy", "loss")):
            ax = axes[r, c]
            for model in ABLATIONS:
                cur = runs.curves[(name, model, label, runs.seeds[0])]
                steps = np.maximum(cur.steps, 0.7)  # step 0 drawn left of step 1
                color = _MODEL_COLORS[model]
                for split, ls in (("train", "-"), ("test", "--")):
                    values = cur.metrics[f"{split}_{metric}"]
                    ax.plot(steps, values, ls, color=color, linewidth=1.6)
                if model in PAPER_ACCURACY_LOSS:
                    paper = PAPER_ACCURACY_LOSS[model][metric]
                    ax.axhline(paper, color=color, linestyle=":", linewidth=1.3)
            ax.set_xscale("log")
            ax.set_ylabel(f"{metric}")
            ax.set_title(f"{title}, {label}: {metric}", fontsize=11)
        axes[1, c].set_xlabel("training step (log scale; step 0 at the left edge)")
    handles = [
        Line2D([], [], color=_MODEL_COLORS[m], label=ABLATIONS[m][0]) for m in ABLATIONS
    ]
    handles += [
        Line2D([], [], color="0.3", ls=ls, label=lab)
        for ls, lab in (
            ("-", "training split"),
            ("--", "test split"),
            (":", "paper's value"),
        )
    ]
    _legend(fig, handles, 3, 0.09)
    return fig


_READ_STYLE = {"tokens": "-", "bins": "--", "scale-free": ":"}
_DATA_COLOR = {"imdb": PALETTE["theory"], "yelp": PALETTE["negative"]}


def spread_figure(
    spreads: Mapping[tuple[str, str], pd.DataFrame],
    names: Mapping[str, str],
    labels: Sequence[str],
):
    """The spread ratio (frozen over trained) of both scores along training, in the
    three readings of :data:`SPREAD_READINGS`, one column per dynamics label."""
    fig, axes = plt.subplots(2, 2, figsize=(9.0, 7.2), sharex="col", sharey="row")
    for c, label in enumerate(labels):
        for r, score in enumerate(("E.v", "E.p")):
            ax = axes[r, c]
            for name in names:
                frame = spreads[(name, label)]
                for reading, ls in _READ_STYLE.items():
                    sub = frame[
                        (frame["score"] == score) & (frame["reading"] == reading)
                    ]
                    ax.plot(
                        sub["step"],
                        sub["ratio"],
                        ls,
                        color=_DATA_COLOR[name],
                        linewidth=1.6,
                    )
            ax.axhline(PAPER_SPREAD_RATIO[score], color="0.3", lw=1.0)
            ax.axhline(1.0, color="0.7", lw=0.8)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(f"{label}: {score.replace('.', '·')}", fontsize=11)
            ax.set_ylabel("spread ratio, frozen / trained")
        axes[1, c].set_xlabel("training step (log scale)")
    handles = [Line2D([], [], color=_DATA_COLOR[n], label=names[n]) for n in names]
    handles += [
        Line2D([], [], color="0.3", ls=ls, label=SPREAD_READINGS[r])
        for r, ls in _READ_STYLE.items()
    ]
    handles += [
        Line2D([], [], color="0.3", lw=1.0, label="paper: 1/8 (E·v), 1/6 (E·p)")
    ]
    _legend(fig, handles, 3, 0.11)
    return fig


def along_figure(
    along: Mapping[tuple[str, str], pd.DataFrame],
    names: Mapping[str, str],
    labels: Sequence[str],
    seeds: Sequence[int],
    *,
    threshold: float,
    budget: int,
):
    """The value trend and the U along training, every seed, one line colour per
    dynamics label, with the ``threshold`` and the real-data chapter's ``budget``."""
    colors = dict(zip(labels, (PALETTE["theory"], PALETTE["negative"])))
    fig, axes = plt.subplots(2, 2, figsize=(9.0, 7.0), sharex=True, sharey=True)
    for r, name in enumerate(names):
        for c, key in enumerate(("value", "cls")):
            ax = axes[r, c]
            for label in labels:
                frame = along[(name, label)]
                for seed in seeds:
                    sub = frame[(frame["statistic"] == key) & (frame["seed"] == seed)]
                    ax.plot(
                        sub["step"],
                        sub["value"],
                        color=colors[label],
                        linewidth=1.4,
                        alpha=0.85,
                    )
            ax.axhline(threshold, color="0.5", lw=0.9, ls="--")
            ax.axvline(budget, color="0.3", lw=0.9, ls=":")
            ax.set_xscale("log")
            ax.set_title(f"{names[name]}: {PICTURE_STATISTICS[key]}", fontsize=11)
        axes[r, 0].set_ylabel("rank correlation")
    for ax in axes[1]:
        ax.set_xlabel("training step (log scale)")
    handles = [Line2D([], [], color=colors[lab], label=lab) for lab in labels]
    handles += [
        Line2D(
            [], [], color="0.5", ls="--", label=f"{threshold} (asserted in chapter 4)"
        ),
        Line2D(
            [], [], color="0.3", ls=":", label=f"chapter 4's budget ({budget} steps)"
        ),
    ]
    _legend(fig, handles, 2, 0.09)
    return fig


def styled_number_table(table: pd.DataFrame):
    """A ``paper_number_table`` (or several, concatenated), formatted."""
    steps = ["step: paper acc.", "step: paper loss"]
    return (
        table.style.format("{:.3f}")
        .format("{:.0f}", subset=steps, na_rep="never")
        .format("{:.2f}", subset=["paper acc.", "paper loss"])
    )


def styled_cross_table(table: pd.DataFrame):
    """A ``crossing_table``, formatted."""
    first = [c for c in table.columns if c[0].startswith("first")]
    return table.style.format("{:.3f}").format("{:.0f}", subset=first, na_rep="never")


def styled_nearest(table: pd.DataFrame):
    """Either table of ``nearest_tables``, formatted to fit the column."""
    ints, numeric = ["seed", "step"], table.select_dtypes("number").columns
    floats = [c for c in numeric if c not in ints + ["dist."]]
    return (
        table.style.format("{:.3f}", subset=floats)
        .format("{:.0f}", subset=ints)
        .format("{:.1f}", subset=["dist."])
    )
