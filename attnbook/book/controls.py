"""The extension chapters' controls (a model trained on real and permuted labels from
several seeds, the rank trend of its scores beside the shuffled-label one); figures."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy.stats import t as student_t

from attnbook.book.checks import check, checks
from attnbook.book.plotting import PALETTE, ROW_HEIGHT_IN, panel_grid, plot_binned
from attnbook.book.records import glue
from attnbook.engine.counts import TokenCounts
from attnbook.experiments.importance import (
    partial_spearman,
    spearman,
    token_importance,
)
from attnbook.validation import check_count

#: The level of the one-sided prediction bound that the controls set.
LEVEL = 0.99
#: How many standard errors of a rank correlation between unrelated quantities the
#: initial embeddings' statistics may reach (:func:`check_initial`).
INITIAL_LIMIT = 5.0


@dataclass(frozen=True)
class Run:
    """One trained model (``kind``: ``labels`` or ``shuffled``) and what it gave."""

    kind: str
    seed: int
    labels: np.ndarray
    scores: dict[str, np.ndarray]
    initial: dict[str, np.ndarray]
    metrics: dict[str, float]


def label_control_runs(
    train: Callable, labels: object, *, seeds: Sequence[int], shuffled_seeds, rng
) -> list[Run]:
    """``train(seed, labels) -> (scores, initial scores, metrics)`` on ``labels`` from
    every seed, then on a fresh permutation (from ``rng``) from every shuffled seed."""
    all_seeds = [int(s) for s in (*seeds, *shuffled_seeds)]
    if not seeds or not shuffled_seeds or len(set(all_seeds)) != len(all_seeds):
        raise ValueError("seeds and shuffled_seeds must be non-empty and distinct")
    y, runs = np.asarray(labels), []
    for kind, group in (("labels", seeds), ("shuffled", shuffled_seeds)):
        for seed in group:
            fitted = y if kind == "labels" else rng.permutation(y)
            scores, initial, metrics = train(int(seed), fitted)
            arrays = [
                {k: np.asarray(v, np.float64) for k, v in d.items()}
                for d in (scores, initial)
            ]
            metrics = {k: float(v) for k, v in metrics.items()}
            runs.append(Run(kind, int(seed), fitted, *arrays, metrics))
    return runs


def control_design(
    seeds: Sequence[int], shuffled_seeds: Sequence[int], **settings: object
) -> dict[str, object]:
    """What a chapter's prose quotes about its :func:`label_control_runs`: its
    ``settings``, how many initializations (``n_inits``), shuffled-label runs
    (``n_shuffled``) and trainings (``n_models``), the seeds as text, and the Student
    factor ``t_factor`` of :func:`control_threshold`'s bound over the shuffled-label
    runs."""

    def listed(group: Sequence[int]) -> str:
        group = [int(s) for s in group]
        if len(group) > 3 and group == list(range(group[0], group[0] + len(group))):
            return f"{group[0]} to {group[-1]}"
        return ", ".join(map(str, group))

    n_shuffled = len(shuffled_seeds)
    return settings | {
        "n_inits": len(seeds),
        "n_shuffled": n_shuffled,
        "n_models": len(seeds) + n_shuffled,
        "seeds": listed(seeds),
        "shuffled_seeds": listed(shuffled_seeds),
        "t_factor": float(student_t.ppf(LEVEL, n_shuffled - 1)),
        "initial_limit": INITIAL_LIMIT,
    }


def scores_of(runs, kind: str, name: str, *, initial: bool = False) -> list:
    """The score ``name`` of every run of ``kind`` (at the start with ``initial``)."""
    chosen = [r for r in runs if r.kind == kind]
    if not chosen:
        raise ValueError(f"no run of kind {kind!r}")
    return [(r.initial if initial else r.scores)[name] for r in chosen]


def metric_of(runs, kind: str, name: str) -> np.ndarray:
    """The metric ``name`` of every run of ``kind``."""
    return np.array([r.metrics[name] for r in runs if r.kind == kind])


def _spread(values: np.ndarray) -> str:
    return f"{values.mean():.3f} [{values.min():.3f}, {values.max():.3f}]"


def metric_table(runs) -> pd.DataFrame:
    """One row per kind of run: every metric as ``mean [min, max]`` over its runs."""
    rows = {}
    for kind in dict.fromkeys(r.kind for r in runs):
        names = next(r for r in runs if r.kind == kind).metrics
        rows[kind] = {m: _spread(metric_of(runs, kind, m)) for m in names}
    out = pd.DataFrame(rows).T
    out.index.name = "labels"
    return out


def metric_ranges(runs, metrics: Mapping, prefixes: Mapping) -> dict[str, float]:
    """``<prefixes[kind]>_<metrics[name]>_min`` and ``_max`` of every metric, kind."""
    out = {}
    for kind, prefix in prefixes.items():
        for metric, short in metrics.items():
            values = metric_of(runs, kind, metric)
            out[f"{prefix}_{short}_min"] = float(values.min())
            out[f"{prefix}_{short}_max"] = float(values.max())
    return out


def leave_out_rare(importance, counts: TokenCounts, min_documents: int):
    """``importance`` (``(V,)`` or ``(V, K)``) with the tokens in fewer than
    ``min_documents`` documents set to NaN, and how many finite ones that drops."""
    imp = np.array(importance, dtype=np.float64)
    docs = np.bincount(counts.token_ids.cpu().numpy(), minlength=counts.vocab_size)
    if imp.shape[0] != docs.size:
        raise ValueError(
            f"importance has {imp.shape[0]} tokens, counts a vocabulary of {docs.size}"
        )
    rare = docs < min_documents
    finite = np.isfinite(imp) if imp.ndim == 1 else np.isfinite(imp).all(axis=1)
    n_left_out = int((rare & finite).sum())
    imp[rare] = np.nan
    return imp, n_left_out


def heldout_measures(corpus, min_documents: int) -> tuple[dict[str, np.ndarray], int]:
    """The held-out importance (rare tokens left out), the training split's and the log
    document frequency of ``corpus``; and the number of tokens left out."""
    heldout, n_left_out = leave_out_rare(
        token_importance(corpus.test, corpus.test_labels), corpus.test, min_documents
    )
    return {
        "heldout": heldout,
        "train": token_importance(corpus.train, corpus.train_labels),
        "log_df": np.log(corpus.vocabulary.document_frequency),
    }, n_left_out


def trend_statistic(score, importance, shape: str, log_df=None) -> float:
    """Spearman's rho of ``score`` against ``I`` (``"monotone"``), ``|I|`` (``"u"``) or
    the smaller of its two arms ``I > 0``, ``I < 0`` (``"arms"``), over the finite
    tokens; partial given ``log_df``."""
    if shape not in ("monotone", "u", "arms"):
        raise ValueError(f"shape must be monotone, u or arms, got {shape!r}")
    s = np.asarray(score, dtype=np.float64)
    x = np.asarray(importance, dtype=np.float64)
    keep = np.isfinite(s) & np.isfinite(x)
    z = None if log_df is None else np.asarray(log_df, dtype=np.float64)
    if z is not None:
        keep &= np.isfinite(z)
        z = z[keep]
    s, x = s[keep], x[keep]

    def rho(s, x, z):
        return spearman(s, x) if z is None else partial_spearman(s, x, z)

    if shape != "arms":
        return rho(s, x if shape == "monotone" else np.abs(x), z)
    sides = (x > 0, x < 0)
    return float(
        min(rho(s[i], np.abs(x[i]), None if z is None else z[i]) for i in sides)
    )


def _bound(v: np.ndarray, level: float):
    """Student's t prediction bound of each row of ``v``, at least its largest draw."""
    n = v.shape[-1]
    t = student_t.ppf(level, n - 1)
    bound = v.mean(-1) + t * v.std(-1, ddof=1) * math.sqrt(1 + 1 / n)
    return np.maximum(bound, v.max(-1))


def control_threshold(values, level: float = LEVEL) -> float:
    """One-sided prediction bound for one more draw of a control statistic:
    ``mean + t_{level, n-1} sd sqrt(1 + 1/n)``, at least the largest draw."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1 or v.size < 3 or not np.isfinite(v).all():
        raise ValueError("values must be at least 3 finite numbers")
    return float(_bound(v, level))


@dataclass(frozen=True)
class ControlledTrend:
    """A claim's statistics per run, indexed ``(kind, run)``; thresholds from the
    shuffled runs."""

    shape: str
    runs: pd.DataFrame
    thresholds: dict[str, float]
    level: float
    n_tokens: dict[str, int]

    def values(self, kind: str, statistic: str) -> np.ndarray:
        return self.runs.loc[kind, statistic].to_numpy(dtype=np.float64)

    def seed_range(self, statistic: str) -> float:
        """Range of the statistic over the real-label initialisations."""
        return float(np.ptp(self.values("labels", statistic)))

    def margin(self, statistic: str = "heldout_partial") -> float:
        """Smallest real-label value minus the shuffled-label threshold."""
        smallest = self.values("labels", statistic).min()
        return float(smallest - self.thresholds[statistic])


def controlled_trend(
    labels,
    shuffled,
    initial,
    *,
    heldout,
    train,
    log_df,
    shape: str,
    shuffled_train=None,
    level: float = LEVEL,
) -> ControlledTrend:
    """The statistics of ``shape`` for the scores of the real-label, shuffled-label (at
    least 3) and initial runs, over the tokens of finite held-out importance."""
    if len(labels) < 1 or len(shuffled) < 3 or len(initial) < 1:
        raise ValueError("need a real-label run, three shuffled runs, an initial one")
    held = np.asarray(heldout, dtype=np.float64)
    tr = np.array(train, dtype=np.float64)
    tr[~np.isfinite(held)] = np.nan

    def stats(score) -> dict[str, float]:
        return {
            "heldout": trend_statistic(score, held, shape),
            "heldout_partial": trend_statistic(score, held, shape, log_df),
            "train": trend_statistic(score, tr, shape),
            "train_partial": trend_statistic(score, tr, shape, log_df),
        }

    rows = {("labels", i): stats(score) for i, score in enumerate(labels)}
    for i, score in enumerate(shuffled):
        rows[("shuffled", i)] = row = stats(score)
        if shuffled_train is not None:
            own = np.array(shuffled_train[i], dtype=np.float64)
            own[~np.isfinite(held)] = np.nan
            row["own"] = trend_statistic(score, own, shape)
    rows |= {("initial", i): stats(score) for i, score in enumerate(initial)}
    runs = pd.DataFrame(rows).T
    runs.index = runs.index.set_names(["kind", "run"])
    thresholds = {
        stat: control_threshold(runs.loc["shuffled", stat].to_numpy(float), level)
        for stat in ("heldout", "heldout_partial")
    }
    finite = np.isfinite(np.asarray(train, dtype=np.float64))
    n_tokens = {"heldout": int(np.isfinite(held).sum()), "train": int(finite.sum())}
    return ControlledTrend(shape, runs, thresholds, level, n_tokens)


def runs_trend(runs, score: str, *, column: int | None = None, own=None, **keywords):
    """:func:`controlled_trend` of ``score`` of ``runs`` (its ``column`` if given;
    ``own``: each shuffled run's own importance)."""

    def pick(kind: str, initial: bool = False) -> list[np.ndarray]:
        out = scores_of(runs, kind, score, initial=initial)
        return out if column is None else [s[:, column] for s in out]

    scores = pick("labels"), pick("shuffled"), pick("labels", True)
    return controlled_trend(*scores, shuffled_train=own, **keywords)


def control_table(trends: Mapping[str, ControlledTrend]) -> pd.DataFrame:
    """Raw and partial rho of each trend: real labels, shuffled, threshold, initial,
    training split."""
    rows = {}
    for key, tr in trends.items():
        for stat, train, name in (
            ("heldout", "train", "ρ"),
            ("heldout_partial", "train_partial", "partial ρ"),
        ):
            null = tr.values("shuffled", stat)
            rows[(key, name)] = {
                "real labels": _spread(tr.values("labels", stat)),
                "shuffled": f"{null.mean():.3f} ± {null.std(ddof=1):.3f}",
                "threshold": f"{tr.thresholds[stat]:.3f}",
                "initial": f"{tr.values('initial', stat).max():.3f}",
                "training split": f"{tr.values('labels', train).mean():.3f}",
            }
    out = pd.DataFrame(rows).T
    out.index.names = ["statistic", "measure"]
    return out


def redrawn_margin(
    trend: ControlledTrend,
    statistic: str,
    rng,
    *,
    n_labels: int | None = None,
    n_shuffled: int | None = None,
    draws: int = 20_000,
) -> dict[str, float]:
    """``trend.margin(statistic)``, its ``sd`` with the runs redrawn as Gaussians,
    ``z = margin / sd`` and the share ``fail`` of redrawn margins below 0."""
    real = trend.values("labels", statistic)
    null = trend.values("shuffled", statistic)
    if real.size < 2:
        raise ValueError("need at least two real-label runs to estimate their spread")
    n_labels, n_shuffled = n_labels or real.size, n_shuffled or null.size
    check_count(n_shuffled, "n_shuffled", minimum=3)
    labels = rng.normal(real.mean(), real.std(ddof=1), (draws, n_labels))
    shuffled = rng.normal(null.mean(), null.std(ddof=1), (draws, n_shuffled))
    margins = labels.min(1) - _bound(shuffled, trend.level)
    margin, sd = trend.margin(statistic), float(margins.std(ddof=1))
    fail = float((margins < 0).mean())
    return {"margin": margin, "sd": sd, "z": margin / sd, "fail": fail}


#: The words of the control that the initial embeddings are at chance.
INITIAL_WHAT = (
    "largest |ρ| of the initial embeddings in standard errors √(2/n) "
    f"(at most {INITIAL_LIMIT:g})"
)

_KINDS = {
    "labels": ("real labels", PALETTE["positive"], "o"),
    "shuffled": ("shuffled labels", PALETTE["negative"], "X"),
    "initial": ("initial embeddings", PALETTE["neutral"], "s"),
}


def controls_figure(trends: Mapping[str, ControlledTrend], row_height: float):
    """One row per trend: every run's partial rho as a dot, the threshold as a bar."""
    statistic = "heldout_partial"
    fig, (ax,) = panel_grid(1, row_height=row_height, layout="constrained")
    dots = dict(s=28, alpha=0.85, linewidth=0, zorder=3)
    names = list(trends)
    for row, name in enumerate(names):
        y = len(names) - 1 - row
        tr = trends[name]
        for offset, (kind, (label, color, marker)) in zip(
            (0.18, 0.0, -0.18), _KINDS.items()
        ):
            values = tr.values(kind, statistic)
            at = np.full(values.size, y + offset)
            label = label if row == 0 else None
            ax.scatter(values, at, color=color, marker=marker, label=label, **dots)
        threshold = [tr.thresholds[statistic]] * 2
        label = "threshold" if row == 0 else None
        ax.plot(
            threshold, [y - 0.32, y + 0.32], color=PALETTE["theory"], lw=2, label=label
        )
    ax.axvline(0, color="0.7", lw=0.8, zorder=0)
    ax.set_yticks(range(len(names)), names[::-1])
    ax.set_ylim(-0.6, len(names) - 0.4)
    ax.set(xlabel="partial ρ given log document frequency (held-out importance)")
    fig.legend(loc="outside lower center", ncols=4)
    return fig


def trend_checks(
    trends: Mapping[str, ControlledTrend],
    *,
    claim: str,
    result: str | None = None,
    reading: str = "paper",
    what: Mapping[str, str] | None = None,
    seed_spread: bool = False,
):
    """``block(name, trend, statistic, **keywords)``: :func:`checks` of the smallest
    real-label value against the threshold, glued with ``name_high`` and
    ``name_threshold``; ``seed_spread``: the range over initialisations as spread."""
    block = checks(claim=claim, result=result, reading=reading, what=what)

    def block_check(name: str, trend: str, statistic: str, **keywords) -> float:
        if seed_spread:
            keywords.setdefault("spread", trends[trend].seed_range(statistic))
        values = trends[trend].values("labels", statistic)
        threshold = trends[trend].thresholds[statistic]
        glue(f"{name}_high", float(values.max()))
        glue(f"{name}_threshold", float(threshold))
        return block(name, float(values.min()), threshold, ">=", **keywords)

    return block_check


def check_initial(
    name: str,
    trends: Mapping[str, ControlledTrend],
    *,
    claim: str,
    what: str = INITIAL_WHAT,
    result: str | None = None,
) -> float:
    """Control: the largest ``|rho| sqrt(n / 2)`` of the initial embeddings is at
    most :data:`INITIAL_LIMIT`."""
    z = max(
        float(np.abs(tr.values("initial", stat)).max())
        * float(np.sqrt(tr.n_tokens["heldout"] / 2))
        for tr in trends.values()
        for stat in tr.thresholds
    )
    return check(
        name,
        z,
        INITIAL_LIMIT,
        "<=",
        claim=claim,
        result=result,
        role="control",
        what=what,
    )


def seed_series(
    importance: np.ndarray,
    runs,
    score: str,
    colors: Sequence[str],
    *,
    label: str = "seed {seed}",
    shuffled: str | None = None,
) -> dict[str, tuple]:
    """:func:`binned_panels` series of ``score`` of every real-label run and, in the
    colour ``shuffled``, of the first shuffled run."""
    real = [r for r in runs if r.kind == "labels"]
    series = {
        label.format(seed=r.seed): (importance, r.scores[score], color)
        for r, color in zip(real, colors)
    }
    if shuffled is not None:
        first = next(r for r in runs if r.kind == "shuffled")
        series["shuffled labels"] = (importance, first.scores[score], shuffled)
    return series


def binned_panels(
    panels,
    *,
    xlabel: str = "held-out importance $I(s)$",
    legends: Sequence[str] = ("upper left", "upper center"),
    row_height: float = ROW_HEIGHT_IN,
    scaled: bool = False,
    min_count: int = 20,
    axes=None,
):
    """One panel per ``(title, ylabel, series)``: each series' bin means (divided by
    its sd when ``scaled``)."""
    if axes is None:
        fig, axes = panel_grid(len(panels), row_height=row_height)
    else:
        fig = axes[0].figure
    legends = [*legends, *[""] * len(panels)]
    for ax, (title, ylabel, series), where in zip(axes, panels, legends):
        for label, (importance, score, color) in series.items():
            shown = score / score.std() if scaled else score
            plot_binned(
                ax,
                importance,
                shown,
                label=label,
                color=color,
                band=False,
                min_count=min_count,
            )
        ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
        if where:
            ax.legend(loc=where)
    return fig


def small_dim_figure(
    one_step: pd.DataFrame,
    heldout: np.ndarray,
    trained: Mapping[int, Sequence[Run]],
):
    """The one-step correlation against ``d`` and its prediction, and the scaled bin
    means of ``E_s . v``, ``E_s . p`` against the held-out importance per ``d``."""
    import seaborn as sns

    fig, axes = panel_grid(3, row_height=3.0)
    ax = axes[0]
    predicted, measured = one_step["r predicted (noise only)"], one_step["r measured"]
    ax.plot(one_step.index, predicted, color=PALETTE["theory"], label="predicted")
    dots = dict(color=PALETTE["negative"], zorder=3, label="measured")
    ax.scatter(one_step.index, measured, **dots)
    ax.set(xscale="log", xlabel="embedding dimension $d$", ylabel="correlation")
    ax.set(title="one step", ylim=(0, 1))
    ax.legend(loc="lower right")
    colors = sns.color_palette("viridis", len(trained))
    panels = []
    for score, title in (("E.v", r"$E_s\cdot v$"), ("E.p", r"$E_s\cdot p$")):
        series = {
            f"d = {d}": (heldout, scores_of(runs, "labels", score)[0], color)
            for (d, runs), color in zip(trained.items(), colors)
        }
        panels.append((f"trained: {title}", "score / std", series))
    binned_panels(panels, axes=axes[1:], scaled=True, min_count=1, legends=())
    handles, labels = axes[1].get_legend_handles_labels()
    where = dict(loc="center", bbox_to_anchor=(0.75, 0.25), ncols=2)
    fig.legend(handles, labels, title="embedding dimension", **where)
    return fig


def xor_figure(curves: pd.DataFrame, shown: Sequence[str], scores: pd.DataFrame):
    """Test accuracy of the ``shown`` models in training; attention scores after it."""
    import seaborn as sns

    fig, axes = panel_grid(2, one_column=True, row_height=2.7)
    curves = curves[curves["model"].isin(shown)]
    sns.lineplot(data=curves, x="step", y="test accuracy", hue="model", ax=axes[0])
    axes[0].axhline(0.75, ls=":", color="0.3")
    axes[0].set(ylim=(0.4, 1.02), title="test accuracy during training")
    sns.barplot(data=scores, x="token", y="attention score", hue="model", ax=axes[1])
    axes[1].set(title="<cls> score after training", xlabel="")
    for ax in axes:
        ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5))
    return fig
