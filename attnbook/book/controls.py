"""The controls of the extension chapters: one model trained from several
initialisations on the real and on permuted labels (:func:`label_control_runs`), the
rank statistic of a trend of its token scores against the importance beside the
shuffled-label threshold (:func:`controlled_trend`), and the checks and figures of it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy.stats import t as student_t

from attnbook.book.checks import check, compare_with_paper
from attnbook.book.plotting import PALETTE, ROW_HEIGHT_IN, panel_grid, plot_binned
from attnbook.book.records import glue
from attnbook.engine.counts import TokenCounts
from attnbook.experiments.importance import (
    partial_spearman,
    spearman,
    token_importance,
)
from attnbook.validation import ArgumentTypeError, check_count, check_generator

__all__ = [
    "Run",
    "TrainFunction",
    "label_control_runs",
    "scores_of",
    "metric_of",
    "metric_table",
    "metric_ranges",
    "SHAPES",
    "documents_per_token",
    "leave_out_rare",
    "heldout_measures",
    "trend_statistic",
    "control_threshold",
    "ControlledTrend",
    "controlled_trend",
    "runs_trend",
    "control_table",
    "redrawn_margin",
    "check_trend",
    "check_initial",
    "trend_checks",
    "plot_controls",
    "controls_figure",
    "binned_panels",
    "seed_series",
]

#: ``train(seed, labels) -> (scores after training, scores at the start, metrics)``.
TrainFunction = Callable[
    [int, np.ndarray],
    tuple[Mapping[str, np.ndarray], Mapping[str, np.ndarray], Mapping[str, float]],
]


@dataclass(frozen=True)
class Run:
    """One trained model: ``kind`` ``"labels"`` or ``"shuffled"``, its initialisation
    ``seed``, the ``labels`` it was fitted to, its scores after training and at the
    start."""

    kind: str
    seed: int
    labels: np.ndarray
    scores: dict[str, np.ndarray]
    initial: dict[str, np.ndarray]
    metrics: dict[str, float]


def label_control_runs(
    train: TrainFunction,
    labels: object,
    *,
    seeds: Sequence[int],
    shuffled_seeds: Sequence[int],
    rng: np.random.Generator,
) -> list[Run]:
    """``train`` on ``labels`` from every seed of ``seeds``, then on a fresh permutation
    of ``labels`` (drawn from ``rng``) from every seed of ``shuffled_seeds`` (all
    distinct)."""
    all_seeds = [int(s) for s in (*seeds, *shuffled_seeds)]
    if not seeds or not shuffled_seeds or len(set(all_seeds)) != len(all_seeds):
        raise ValueError("seeds and shuffled_seeds must be non-empty and distinct")
    check_generator(rng)
    y = np.asarray(labels)
    runs = []
    for kind, group in (("labels", seeds), ("shuffled", shuffled_seeds)):
        for seed in group:
            fitted = y if kind == "labels" else rng.permutation(y)
            scores, initial, metrics = train(int(seed), fitted)
            runs.append(
                Run(
                    kind,
                    int(seed),
                    fitted,
                    {k: np.asarray(v, np.float64) for k, v in scores.items()},
                    {k: np.asarray(v, np.float64) for k, v in initial.items()},
                    {k: float(v) for k, v in metrics.items()},
                )
            )
    return runs


def scores_of(
    runs: Sequence[Run], kind: str, name: str, *, initial: bool = False
) -> list[np.ndarray]:
    """The score ``name`` of every run of ``kind`` (at the initialisation with
    ``initial``)."""
    chosen = [r for r in runs if r.kind == kind]
    if not chosen:
        raise ValueError(f"no run of kind {kind!r}")
    return [(r.initial if initial else r.scores)[name] for r in chosen]


def metric_of(runs: Sequence[Run], kind: str, name: str) -> np.ndarray:
    """The metric ``name`` of every run of ``kind``."""
    return np.array([r.metrics[name] for r in runs if r.kind == kind])


def metric_table(runs: Sequence[Run]) -> pd.DataFrame:
    """One row per kind of run: every metric as ``mean [min, max]`` over its runs."""
    rows = {}
    for kind in dict.fromkeys(r.kind for r in runs):
        names = [r for r in runs if r.kind == kind][0].metrics
        rows[kind] = {
            m: f"{v.mean():.3f} [{v.min():.3f}, {v.max():.3f}]"
            for m in names
            for v in [metric_of(runs, kind, m)]
        }
    out = pd.DataFrame(rows).T
    out.index.name = "labels"
    return out


def metric_ranges(
    runs: Sequence[Run], metrics: Mapping[str, str], prefixes: Mapping[str, str]
) -> dict[str, float]:
    """``<prefixes[kind]>_<metrics[name]>_min`` and ``_max`` of every metric, kind."""
    out = {}
    for kind, prefix in prefixes.items():
        for metric, short in metrics.items():
            values = metric_of(runs, kind, metric)
            out[f"{prefix}_{short}_min"] = float(values.min())
            out[f"{prefix}_{short}_max"] = float(values.max())
    return out


#: The shapes of a trend that :func:`trend_statistic` measures.
SHAPES = ("monotone", "u", "arms")


def documents_per_token(counts: TokenCounts) -> np.ndarray:
    """``(V,)`` number of documents of ``counts`` that contain each token."""
    if not isinstance(counts, TokenCounts):
        raise ArgumentTypeError(
            f"counts must be a TokenCounts, got {type(counts).__name__}"
        )
    toks = counts.token_ids.cpu().numpy()
    return np.bincount(toks, minlength=counts.vocab_size).astype(np.int64)


def leave_out_rare(
    importance: object, counts: TokenCounts, min_documents: int
) -> tuple[np.ndarray, int]:
    """``importance`` (``(V,)`` or ``(V, K)``) with the tokens in fewer than
    ``min_documents`` documents of ``counts`` set to NaN, and how many finite ones that
    drops."""
    min_documents = check_count(min_documents, "min_documents")
    imp = np.array(importance, dtype=np.float64)
    docs = documents_per_token(counts)
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


def _arrays(score: object, importance: object, log_df: object | None):
    s = np.asarray(score, dtype=np.float64)
    x = np.asarray(importance, dtype=np.float64)
    if s.shape != x.shape or s.ndim != 1:
        raise ValueError("score and importance must be 1-D arrays of one length")
    z = None if log_df is None else np.asarray(log_df, dtype=np.float64)
    if z is not None and z.shape != s.shape:
        raise ValueError("log_df must have one entry per token")
    keep = np.isfinite(s) & np.isfinite(x)
    if z is not None:
        keep &= np.isfinite(z)
    return s[keep], x[keep], None if z is None else z[keep]


def _rho(s: np.ndarray, x: np.ndarray, z: np.ndarray | None) -> float:
    return spearman(s, x) if z is None else partial_spearman(s, x, z)


def trend_statistic(
    score: object, importance: object, shape: str, log_df: object | None = None
) -> float:
    """Spearman's rho of ``score`` against ``I`` (``"monotone"``), ``|I|`` (``"u"``) or
    the smaller of its two arms ``I > 0``, ``I < 0`` (``"arms"``); partial given
    ``log_df``."""
    if shape not in SHAPES:
        raise ValueError(f"shape must be one of {sorted(SHAPES)}, got {shape!r}")
    s, x, z = _arrays(score, importance, log_df)
    if shape == "monotone":
        return _rho(s, x, z)
    if shape == "u":
        return _rho(s, np.abs(x), z)
    arms = []
    for side in (x > 0, x < 0):
        arms.append(_rho(s[side], np.abs(x[side]), None if z is None else z[side]))
    return float(min(arms))


def control_threshold(values: object, level: float = 0.99) -> float:
    """One-sided prediction bound for one more draw of a control statistic from its
    draws ``values`` (Student's t): ``mean + t_{level, n-1} sd sqrt(1 + 1/n)``, at least
    the max."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1 or v.size < 3 or not np.isfinite(v).all():
        raise ValueError("values must be at least 3 finite numbers")
    if not 0.5 < level < 1:
        raise ValueError(f"level must be in (0.5, 1), got {level}")
    n = v.size
    t = student_t.ppf(level, n - 1)
    bound = v.mean() + t * v.std(ddof=1) * math.sqrt(1 + 1 / n)
    return float(max(bound, v.max()))


@dataclass(frozen=True)
class ControlledTrend:
    """The statistic of one claim for every run, indexed ``(kind, run)`` with kind
    ``labels``, ``shuffled`` or ``initial``; ``thresholds`` from the shuffled runs."""

    shape: str
    runs: pd.DataFrame
    thresholds: dict[str, float]
    level: float
    n_tokens: dict[str, int]

    def values(self, kind: str, statistic: str) -> np.ndarray:
        """The statistic over the runs of one kind."""
        return self.runs.loc[kind, statistic].to_numpy(dtype=np.float64)

    def seed_range(self, statistic: str) -> float:
        """Range of the statistic over the real-label initialisations."""
        return float(np.ptp(self.values("labels", statistic)))

    def margin(self, statistic: str = "heldout_partial") -> float:
        """Smallest real-label value minus the shuffled-label threshold."""
        smallest = self.values("labels", statistic).min()
        return float(smallest - self.thresholds[statistic])


def controlled_trend(
    labels: Sequence[object],
    shuffled: Sequence[object],
    initial: Sequence[object],
    *,
    heldout: object,
    train: object,
    log_df: object,
    shape: str,
    shuffled_train: Sequence[object] | None = None,
    level: float = 0.99,
) -> ControlledTrend:
    """The statistic of ``shape`` for the per-token scores of the real-label,
    shuffled-label (at least 3) and initial runs, over the tokens with a finite held-out
    importance."""
    if len(labels) < 1 or len(shuffled) < 3 or len(initial) < 1:
        raise ValueError(
            "need at least one real-label run, three shuffled runs, one initial"
        )
    held = np.asarray(heldout, dtype=np.float64)
    tr = np.array(train, dtype=np.float64)
    tr[~np.isfinite(held)] = np.nan
    if shuffled_train is not None and len(shuffled_train) != len(shuffled):
        raise ValueError("shuffled_train needs one importance per shuffled run")

    def stats(score: object) -> dict[str, float]:
        return {
            "heldout": trend_statistic(score, held, shape),
            "heldout_partial": trend_statistic(score, held, shape, log_df),
            "train": trend_statistic(score, tr, shape),
            "train_partial": trend_statistic(score, tr, shape, log_df),
        }

    rows = {}
    for i, score in enumerate(labels):
        rows[("labels", i)] = stats(score)
    for i, score in enumerate(shuffled):
        row = stats(score)
        if shuffled_train is not None:
            own = np.array(shuffled_train[i], dtype=np.float64)
            own[~np.isfinite(held)] = np.nan
            row["own"] = trend_statistic(score, own, shape)
        rows[("shuffled", i)] = row
    for i, score in enumerate(initial):
        rows[("initial", i)] = stats(score)
    runs = pd.DataFrame(rows).T
    runs.index = runs.index.set_names(["kind", "run"])
    thresholds = {
        stat: control_threshold(runs.loc["shuffled", stat].to_numpy(float), level)
        for stat in ("heldout", "heldout_partial")
    }
    n_tokens = {
        "heldout": int(np.isfinite(held).sum()),
        "train": int(np.isfinite(np.asarray(train, dtype=np.float64)).sum()),
    }
    return ControlledTrend(shape, runs, thresholds, level, n_tokens)


def _spread(values: np.ndarray) -> str:
    return f"{values.mean():.3f} [{values.min():.3f}, {values.max():.3f}]"


def control_table(trends: Mapping[str, ControlledTrend]) -> pd.DataFrame:
    """Raw and partial rho per claim statistic: real labels, shuffled control,
    threshold, initial embeddings, training split."""
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


def runs_trend(
    runs: Sequence[Run],
    score: str,
    *,
    shape: str,
    heldout: object,
    train: object,
    log_df: object,
    column: int | None = None,
    own: Sequence[object] | None = None,
    level: float = 0.99,
) -> ControlledTrend:
    """:func:`controlled_trend` of the score ``score`` of ``runs`` (``column`` of a
    ``(V, K)`` score; ``own``: each shuffled run's own importance)."""

    def pick(kind: str, initial: bool = False) -> list[np.ndarray]:
        out = scores_of(runs, kind, score, initial=initial)
        return out if column is None else [s[:, column] for s in out]

    return controlled_trend(
        pick("labels"),
        pick("shuffled"),
        pick("labels", initial=True),
        heldout=heldout,
        train=train,
        log_df=log_df,
        shape=shape,
        shuffled_train=own,
        level=level,
    )


def redrawn_margin(
    trend: ControlledTrend,
    statistic: str,
    rng: np.random.Generator,
    *,
    n_labels: int | None = None,
    n_shuffled: int | None = None,
    draws: int = 20_000,
) -> dict[str, float]:
    """The margin of ``trend.margin(statistic) >= 0`` with its runs redrawn as
    Gaussians: ``margin``, its ``sd`` over ``draws``, ``z = margin / sd`` and the share
    ``fail`` < 0."""
    real = trend.values("labels", statistic)
    null = trend.values("shuffled", statistic)
    if real.size < 2:
        raise ValueError("need at least two real-label runs to estimate their spread")
    n_labels = real.size if n_labels is None else check_count(n_labels, "n_labels")
    if n_shuffled is None:
        n_shuffled = null.size
    n_shuffled = check_count(n_shuffled, "n_shuffled", minimum=3)
    draws = check_count(draws, "draws")
    labels = rng.normal(real.mean(), real.std(ddof=1), (draws, n_labels))
    shuffled = rng.normal(null.mean(), null.std(ddof=1), (draws, n_shuffled))
    t = student_t.ppf(trend.level, n_shuffled - 1)
    bound = shuffled.mean(1) + t * shuffled.std(1, ddof=1) * math.sqrt(
        1 + 1 / n_shuffled
    )
    margins = labels.min(1) - np.maximum(bound, shuffled.max(1))
    margin, sd = trend.margin(statistic), float(margins.std(ddof=1))
    return {
        "margin": margin,
        "sd": sd,
        "z": margin / sd,
        "fail": float((margins < 0).mean()),
    }


#: The words of the control that the initial embeddings are at chance.
INITIAL_WHAT = (
    "largest |ρ| of the initial embeddings in standard errors √(2/n) (at most 5)"
)

_KINDS = {
    "labels": ("real labels", PALETTE["positive"], "o"),
    "shuffled": ("shuffled labels", PALETTE["negative"], "X"),
    "initial": ("initial embeddings", PALETTE["neutral"], "s"),
}


def plot_controls(
    ax, trends: Mapping[str, ControlledTrend], statistic: str = "heldout_partial"
) -> None:
    """Draw on ``ax`` one row per trend: every run's ``statistic`` as a dot, the
    threshold as a bar."""
    names = list(trends)
    for row, name in enumerate(names):
        y = len(names) - 1 - row
        tr = trends[name]
        for offset, (kind, (label, color, marker)) in zip(
            (0.18, 0.0, -0.18), _KINDS.items()
        ):
            values = tr.values(kind, statistic)
            ax.scatter(
                values,
                np.full(values.size, y + offset),
                color=color,
                marker=marker,
                s=28,
                alpha=0.85,
                linewidth=0,
                label=label if row == 0 else None,
                zorder=3,
            )
        ax.plot(
            [tr.thresholds[statistic]] * 2,
            [y - 0.32, y + 0.32],
            color=PALETTE["theory"],
            lw=2,
            label="threshold" if row == 0 else None,
        )
    ax.axvline(0, color="0.7", lw=0.8, zorder=0)
    ax.set_yticks(range(len(names)), names[::-1])
    ax.set_ylim(-0.6, len(names) - 0.4)


def controls_figure(
    trends: Mapping[str, ControlledTrend],
    row_height: float,
    statistic: str = "heldout_partial",
):
    """:func:`plot_controls` as a one-panel figure, the legend below it."""
    fig, (ax,) = panel_grid(1, row_height=row_height, layout="constrained")
    plot_controls(ax, trends, statistic)
    ax.set(xlabel="partial ρ given log document frequency (held-out importance)")
    fig.legend(loc="outside lower center", ncols=4)
    return fig


def check_trend(
    name: str,
    trend: ControlledTrend,
    statistic: str,
    *,
    claim: str,
    what: str,
    result: str | None = None,
    reading: str = "paper",
    asserted: bool = True,
    spread: float | None = None,
) -> float:
    """Check the smallest real-label value of ``statistic`` against the shuffled-label
    threshold (recorded only, with ``asserted=False``); glue ``_high`` and
    ``_threshold``."""
    values = trend.values("labels", statistic)
    threshold = trend.thresholds[statistic]
    glue(f"{name}_high", float(values.max()))
    glue(f"{name}_threshold", float(threshold))
    smallest = float(values.min())
    record = check if asserted else compare_with_paper
    record(
        name,
        smallest,
        threshold,
        ">=",
        claim=claim,
        result=result,
        what=what,
        reading=reading,
        spread=spread,
    )
    return smallest


def check_initial(
    name: str,
    trends: Mapping[str, ControlledTrend],
    *,
    claim: str,
    what: str = INITIAL_WHAT,
    result: str | None = None,
) -> float:
    """Control: the largest ``|rho| sqrt(n / 2)`` of the initial embeddings (standard
    errors of a rank correlation over half the ``n`` held-out tokens) is at most 5."""
    z = max(
        float(np.abs(tr.values("initial", stat)).max())
        * float(np.sqrt(tr.n_tokens["heldout"] / 2))
        for tr in trends.values()
        for stat in tr.thresholds
    )
    return check(
        name, z, 5.0, "<=", claim=claim, result=result, role="control", what=what
    )


def trend_checks(
    trends: Mapping[str, ControlledTrend],
    *,
    claim: str,
    result: str | None = None,
    reading: str = "paper",
    what: Mapping[str, str] | None = None,
    seed_spread: bool = False,
):
    """:func:`check_trend` with ``claim``, ``result``, ``reading`` set once for a block;
    with ``seed_spread`` each check's spread is its range over initialisations."""
    shared = dict(claim=claim, result=result, reading=reading)
    described = dict(what or {})

    def block_check(name: str, trend: str, statistic: str, **keywords) -> float:
        keywords.setdefault("what", described.get(name))
        if seed_spread:
            keywords.setdefault("spread", trends[trend].seed_range(statistic))
        return check_trend(name, trends[trend], statistic, **{**shared, **keywords})

    return block_check


#: One series of :func:`binned_panels`: ``(importance, score, colour)``.
Series = tuple[np.ndarray, np.ndarray, str]


def seed_series(
    importance: np.ndarray,
    runs: Sequence[Run],
    score: str,
    colors: Sequence[str],
    *,
    label: str = "seed {seed}",
    shuffled: str | None = None,
) -> dict[str, Series]:
    """Series of :func:`binned_panels` for ``score`` of every real-label run and, when
    ``shuffled`` names a colour, of the first shuffled run."""
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
    panels: Sequence[tuple[str, str, Mapping[str, Series]]],
    *,
    xlabel: str = "held-out importance $I(s)$",
    legends: Sequence[str] = ("upper left", "upper center"),
    row_height: float = ROW_HEIGHT_IN,
    scaled: bool = False,
    min_count: int = 20,
    axes=None,
):
    """One panel per ``(title, ylabel, series)``: each series' bin means (bins under
    ``min_count`` tokens left out), scaled by its sd when ``scaled``."""
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
