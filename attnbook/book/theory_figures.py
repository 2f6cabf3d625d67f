"""The figures of the chapters on the model and the one gradient step."""

from __future__ import annotations

from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import torch

from attnbook.book.plotting import PALETTE, identity_scatter, panel_grid
from attnbook.models.attention import attention_weights
from attnbook.theory.one_step import pearson

CLASS_NAMES = {1: "positive", -1: "negative", 0: "neutral"}


def attention_panels(
    E: torch.Tensor,
    sequence: Sequence[int],
    token_class: np.ndarray,
    star: int,
    scales: Sequence[float],
):
    """One panel per scale ``c``: the attention weights of ``sequence`` for ``p = c
    E[star]`` by token class; returns the figure and the weights."""
    names = np.array([CLASS_NAMES[int(c)] for c in token_class])[sequence]
    fig, axes = panel_grid(
        len(scales), one_column=True, row_height=1.5, sharex=True, layout="constrained"
    )
    weights = []
    for ax, scale in zip(axes, scales):
        weights.append(attention_weights(E, scale * E[star], sequence).numpy())
        for name in ("positive", "negative", "neutral"):
            at = np.flatnonzero(names == name)
            if at.size:
                ax.bar(at, weights[-1][at], color=PALETTE[name], label=f"{name} token")
        ax.set(ylim=(0, 1), ylabel="weight", title=f"$c = {scale:g}$")
    axes[-1].set(xlabel="position in the sequence", xticks=range(len(sequence)))
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=3)
    return fig, weights


def one_step_scatter(main, token_class: np.ndarray, imdb_runs: dict, dim: int):
    """Value scores after one step against the lemma's prediction: synthetic (left),
    IMDB per initialization scale (right)."""
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.9))
    block = pd.Series(token_class).map(CLASS_NAMES).to_numpy()
    palette = {k: PALETTE[k] for k in ("positive", "negative", "neutral")}
    identity_scatter(axes[0], main.pred_value, main.value1, hue=block, palette=palette)
    axes[0].set_title(f"synthetic, r = {pearson(main.value1, main.pred_value):.4f}")
    for (sigma, res), colour in zip(imdb_runs.items(), ("#e9c46a", "#264653")):
        label = f"σ = {sigma:g}, r = {pearson(res.value1, res.pred_value):.3f}"
        dots = dict(s=4, alpha=0.5, color=colour, linewidth=0, label=label)
        axes[1].scatter(res.pred_value, res.value1, **dots)
    last = list(imdb_runs.values())[-1]
    identity_scatter(axes[1], last.pred_value, last.value1, s=0)
    axes[1].set_title(f"IMDB, d = {dim}")
    axes[1].legend(markerscale=3)
    for ax in axes:
        ax.set(
            xlabel=r"predicted $\frac{\eta}{2}\alpha_s\|v\|^2$",
            ylabel=r"measured $E_s^1\cdot v$",
        )
        ax.xaxis.set_major_locator(plt.MaxNLocator(4))
    return fig


def error_scaling(by_dim: pd.DataFrame, by_sigma: pd.DataFrame):
    """RMS of the three errors against ``d`` and ``sigma``, with log-log fits."""
    fig, axes = plt.subplots(2, 1, figsize=(7, 7.5))
    for ax, frame, xcol, xlabel in (
        (axes[0], by_dim, "dim", "embedding dimension d"),
        (axes[1], by_sigma, "init_scale", "initialization scale σ"),
    ):
        for col, colour, label in (
            ("total_error", "#264653", "total error"),
            ("increment_error", "#e76f51", "increment error"),
            ("second_order_error", "#2a9d8f", "second-order residual"),
        ):
            slope, intercept = np.polyfit(np.log(frame[xcol]), np.log(frame[col]), 1)
            dots = dict(s=12, color=colour, alpha=0.6, linewidth=0)
            ax.scatter(frame[xcol], frame[col], **dots)
            xs = np.array([frame[xcol].min(), frame[xcol].max()])
            fit = np.exp(intercept) * xs**slope
            ax.plot(xs, fit, color=colour, label=f"{label}, slope {slope:.3f}")
        ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel="RMS over tokens")
        ax.legend(loc="lower left" if xcol == "dim" else "upper left")
    return fig


def kclass_scatter(results: Sequence[dict], titles: Sequence[str], classes: Sequence):
    """``E^1_s . v_k`` against ``eta gamma_sk ||v_k||^2``, one panel per K-class run."""
    fig, axes = plt.subplots(1, len(results), figsize=(8, 4.2))
    for ax, res, title, names in zip(axes, results, titles, classes):
        hue = np.tile(np.array(names), res["measured"].shape[0])
        identity_scatter(ax, res["diagonal"], res["measured"], hue=hue, s=6, alpha=0.7)
        ax.set(
            title=f"{title}\nr = {pearson(res['measured'], res['diagonal']):.4f}",
            xlabel=r"predicted $\eta\,\gamma_{sk}\|v_k\|^2$",
            ylabel=r"measured $E_s^1\cdot v_k$",
        )
        ax.legend(markerscale=2, loc="upper left")
        ax.xaxis.set_major_locator(plt.MaxNLocator(3))
    return fig


def breakdown_panels(
    small_d: pd.DataFrame, large_sigma: pd.DataFrame, large_eta: pd.DataFrame
):
    """Where the one-step lemma stops holding: small ``d``, large ``sigma``, large
    step."""
    fig, axes = plt.subplots(2, 2, figsize=(9, 7.5))
    axes = axes.ravel()
    colours = sns.color_palette("viridis", 3)
    loglog, label_error = dict(xscale="log", yscale="log"), "relative increment error"
    for colour, (sigma, frame) in zip(colours, small_d.groupby("init_scale")):
        mean = frame.groupby("dim")[["pearson", "predicted_pearson"]].mean()
        dots = dict(s=14, color=colour, label=f"σ = {sigma:g}")
        axes[0].scatter(frame["dim"], frame["pearson"], **dots)
        axes[0].plot(mean.index, mean["predicted_pearson"], color=colour)
    axes[0].axhline(0.99, color="grey", ls=":")
    axes[0].set(xscale="log", xlabel="d", ylabel="Pearson r", title="small d")
    axes[0].legend(loc="lower right")
    for colour, (dim, frame) in zip(colours, large_sigma.groupby("dim")):
        x, y = frame["sigma_over_sqrt_d"], frame["relative_increment_error"]
        axes[1].scatter(x, y, s=14, color=colour, label=f"d = {dim}")
    xs = np.logspace(-3, 0.5, 20)
    axes[1].plot(xs, xs, color=PALETTE["theory"], ls="--", label="σ/√d")
    large = dict(xlabel="σ/√d", ylabel=label_error, title="large initialization")
    axes[1].set(**large, **loglog)
    axes[1].legend(loc="upper left")
    mean_eta = large_eta.groupby("eta")[["pearson", "relative_increment_error"]].mean()
    for ax, column, marker, colour, label, extra in (
        (axes[2], "pearson", "o", "#264653", "Pearson r", dict(xscale="log")),
        (axes[3], "relative_increment_error", "s", "#e76f51", label_error, loglog),
    ):
        line = dict(marker=marker, color=colour, label=label)
        ax.plot(mean_eta.index, mean_eta[column], **line)
        if ax is axes[2]:
            ax.axhline(0.99, color="grey", ls=":", label="0.99")
        ax.set(xlabel="step size η", title="large step", **extra)
    axes[2].set(ylabel="Pearson r")
    axes[3].set(ylim=(1e-5, 1e-2), ylabel=label_error)
    axes[2].legend(loc="lower right")
    axes[3].legend(loc="upper right")
    return fig
