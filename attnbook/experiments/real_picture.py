"""The computations and tables of the real-data chapter (IMDB and a balanced Yelp
sample): its corpora, the statistics of each token, the runs behind the picture, and
the numbers its checks compare.

- :func:`review_corpora` -- IMDB, the balanced Yelp sample and all of Yelp, each with
  the vocabulary closest to the paper's size; :func:`corpus_table` describes them;
- :func:`token_statistics` -- importance, average signed frequency and document
  frequency of every token; :func:`one_step_eta` the step size the chapter uses;
- :func:`chapter_runs` -- the picture's runs on every corpus (three seeds, the
  controls and the shuffled-label null on IMDB and balanced Yelp, one seed on all of
  Yelp);
- :func:`seed_statistics` -- what the checks of the picture compare: the smallest
  seed, the excess over the null and its noise scale;
- :func:`gd_table` and :func:`gd_statistics` -- every gradient-descent run (seed, step
  size, rounding), and what the checks on them compare;
- :func:`null_noise_table`, :func:`quartile_table`, :func:`outer_bins` -- the tables
  of the chapter's exercises.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np
import pandas as pd
import torch

from attnbook.data.corpus import ReviewCorpus
from attnbook.experiments.curves import Dynamics
from attnbook.experiments.importance import (
    bin_statistics,
    document_class_counts,
    observed_range,
    spearman,
    token_importance,
)
from attnbook.experiments.picture import (
    GD_KEYS,
    MAIN_STATISTICS,
    RUN_NAMES,
    PictureRuns,
    PictureSettings,
    picture_runs,
)
from attnbook.experiments.real_data import ReviewExperimentConfig
from attnbook.experiments.robustness import (
    PICTURE_MATH,
    PICTURE_STATISTICS,
    picture_correlations,
    reviews_for_vocabulary,
)
from attnbook.theory.frequency import average_signed_frequency

__all__ = [
    "NAMES",
    "PAPER_VOCAB",
    "DATASETS",
    "BINNINGS",
    "review_corpora",
    "corpus_table",
    "token_statistics",
    "one_step_eta",
    "chapter_runs",
    "bin_range",
    "SeedStatistics",
    "seed_statistics",
    "GD_STEPS",
    "gd_table",
    "gd_quotes",
    "styled_gd_table",
    "GDStatistics",
    "gd_statistics",
    "picture_descriptions",
    "ablation_descriptions",
    "U_CONTROLS",
    "run_quotes",
    "styled_run_table",
    "null_noise_table",
    "quartile_table",
    "outer_bins",
]

#: The paper's vocabulary sizes, and the names of the chapter's corpora.
PAPER_VOCAB = {"imdb": 7_766, "yelp": 5_424}
NAMES = {"imdb": "IMDB", "yelp": "Yelp (balanced)", "yelp_all": "Yelp (all)"}
DATASETS = ("imdb", "yelp")
#: The two binnings of the importance axis: [-1, 1], and the observed range (paper).
BINNINGS = {"[−1, 1]": None, "[min I, max I] (paper)": "observed"}

_ROWS = {
    "vocab_size": "vocabulary (tokens)",
    "min_df": "min_df (documents)",
    "n_train": "training reviews",
    "n_test": "test reviews",
    "positive_fraction_train": "positive training reviews (%)",
    "mean_train_length": "mean review length (tokens)",
    "dropped_train_token_fraction": "token occurrences outside the vocabulary (%)",
}
_PERCENT = ("positive_fraction_train", "dropped_train_token_fraction")


def review_corpora() -> tuple[dict[str, ReviewCorpus], dict[str, int]]:
    """IMDB, Yelp balanced by a sample drawn with seed 7, and all of Yelp, each with the
    ``min_df`` whose vocabulary is closest to the paper's size; returns the corpora and
    their ``min_df``, keyed as :data:`NAMES`."""
    corpora, min_dfs = {}, {}
    for name, target, balance in (
        ("imdb", "imdb", None),
        ("yelp", "yelp", np.random.default_rng(7)),
        ("yelp_all", "yelp", None),
    ):
        corpora[name], min_dfs[name] = reviews_for_vocabulary(
            target, PAPER_VOCAB[target], balance
        )
    return corpora, min_dfs


def corpus_table(corpora: Mapping[str, ReviewCorpus]) -> tuple[object, dict]:
    """The corpora described (a styled table, one column per corpus) and the numbers
    the text quotes, keyed ``<corpus>_<number>``."""
    summary, quoted = {}, {}
    for name, corpus in corpora.items():
        s = corpus.summary()
        for key in _PERCENT:
            s[key] = 100 * s[key]
        summary[NAMES[name]] = {label: s[key] for key, label in _ROWS.items()}
        for key in ("vocab_size", "min_df", "n_train", "n_test"):
            quoted[f"{name}_{key}"] = s[key]
        quoted[f"{name}_pos_pct"] = s["positive_fraction_train"]
        quoted[f"{name}_mean_len"] = s["mean_train_length"]
    rows = [_ROWS[k] for k in _PERCENT]
    table = (
        pd.DataFrame(summary)
        .style.format("{:,.0f}")
        .format("{:.1f}", subset=pd.IndexSlice[rows, :])
    )
    return table, quoted


def token_statistics(
    corpus: ReviewCorpus,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Importance, average signed frequency and document frequency of every token of
    the training split."""
    importance = token_importance(corpus.train, corpus.train_labels)
    alpha = average_signed_frequency(
        corpus.train, corpus.train_labels, corpus.vocab_size
    ).numpy()
    n_pos, n_neg = document_class_counts(corpus.train, corpus.train_labels)
    return importance, alpha, (n_pos + n_neg).astype(np.float64)


def one_step_eta(alpha: np.ndarray, dim: int, sigma: float) -> float:
    """The step size whose predicted change of the median token is ten times the
    initialization noise: ``20 sigma / (sqrt(d) median |alpha_s|)``."""
    return float(20 * sigma / (np.sqrt(dim) * np.median(np.abs(alpha))))


def chapter_runs(
    corpora: Mapping[str, ReviewCorpus],
    alpha: Mapping[str, np.ndarray],
    *,
    dim: int,
    sigma: float,
    n_null: int,
    device: torch.device | str | None = None,
) -> tuple[dict[str, PictureRuns], dict[str, float]]:
    """The picture's runs on every corpus and the one-step size of each: three seeds,
    gradient descent at both step sizes of :data:`GD_STEPS` in both roundings on every
    seed, the head-only controls and ``n_null`` shuffled-label runs, except on
    ``yelp_all`` (one seed, no controls)."""
    runs, etas = {}, {}
    for name, corpus in corpora.items():
        eta = one_step_eta(alpha[name], dim, sigma)
        config = ReviewExperimentConfig(dim=dim, init_scale=sigma, eta=eta)
        gd = {
            step: Dynamics("gd", {"E": eta / div, "p": 0.3, "v": 0.3})
            for step, (div, _) in GD_STEPS.items()
        }
        settings = (
            PictureSettings(seeds=(0,), controls=False)
            if name == "yelp_all"
            else PictureSettings(
                seeds=(0, 1, 2),
                gd=gd["edge"],
                gd_stable=gd["stable"],
                gd_stable_steps=GD_STEPS["stable"][1],
                gd_all_seeds=True,
                head_steps=300,
                null_permutations=n_null,
            )
        )
        runs[name] = picture_runs(
            corpus, config, settings, null_rng=np.random.default_rng(5), device=device
        )
        etas[name] = eta
    return runs, etas


def bin_range(importance: np.ndarray, binning: str | None) -> tuple[float, float]:
    """The interval a binning of :data:`BINNINGS` cuts."""
    return (-1.0, 1.0) if binning is None else observed_range(importance)


@dataclass
class SeedStatistics:
    """Per statistic of :data:`MAIN_STATISTICS`: the smallest seed, its excess over the
    largest null run and the noise scale of that excess; ``quoted`` holds the numbers
    the text quotes (null mean, largest, standard deviation and range; seed range).
    Then the tokens (all, ``I < 0``, ``I > 0``), the largest seed of ``rho(E.p, I)``
    over ``I < 0``, the smallest over ``I > 0``, and the largest ``|rho|`` of the
    value trend and the U at the initialization."""

    smallest: dict[str, float] = field(default_factory=dict)
    excess: dict[str, float] = field(default_factory=dict)
    noise: dict[str, float] = field(default_factory=dict)
    quoted: dict[str, float] = field(default_factory=dict)
    n_tokens: int = 0
    n_negative: int = 0
    n_positive: int = 0
    negative_side: float = 0.0
    positive_side: float = 0.0
    initial: float = 0.0


def seed_statistics(
    table: pd.DataFrame,
    null: pd.DataFrame,
    importance: np.ndarray,
    seeds: tuple[int, ...],
) -> SeedStatistics:
    """What the picture's checks compare, from a :func:`correlation_table` and its
    :func:`null_distribution`. The noise scale is the largest of the seed-to-seed
    range, the standard deviation of the null runs and ``1 / sqrt(V)``, the null
    standard deviation of a rank correlation over ``V`` tokens."""
    rows = table.loc[[f"seed {s}" for s in seeds]]
    V = int(np.isfinite(importance).sum())
    out = SeedStatistics(
        n_tokens=V,
        n_negative=int((importance < 0).sum()),
        n_positive=int((importance > 0).sum()),
        negative_side=rows[PICTURE_STATISTICS["cls_neg"]].max(),
        positive_side=rows[PICTURE_STATISTICS["cls_pos"]].min(),
        initial=table.loc["initialization"][
            [PICTURE_STATISTICS["value"], PICTURE_STATISTICS["cls"]]
        ]
        .abs()
        .max(),
    )
    for key in MAIN_STATISTICS:
        col = PICTURE_STATISTICS[key]
        out.smallest[key] = rows[col].min()
        out.excess[key] = rows[col].min() - null[col].max()
        out.noise[key] = max(
            rows[col].max() - rows[col].min(), null[col].std(ddof=1), 1 / np.sqrt(V)
        )
        out.quoted |= {
            f"{key}_null": null[col].mean(),
            f"{key}_null_max": null[col].max(),
            f"{key}_null_sd": null[col].std(ddof=1),
            f"{key}_null_range": null[col].max() - null[col].min(),
            f"{key}_range": rows[col].max() - rows[col].min(),
        }
    return out


#: The step sizes of gradient descent on ``E`` (``p`` and ``v`` take 0.3): the divisor
#: of the one-step size ``eta`` and the budget in steps. ``edge``: the largest of
#: ``eta / 100, / 30, / 10, / 3`` that stayed finite over 300 steps on IMDB, at Adam's
#: budget; ``stable``: the next smaller, with the budget at which it fits the training
#: set as well as the edge step does in its 200.
GD_STEPS = {"edge": (10, 200), "stable": (30, 400)}


def gd_table(
    runs: PictureRuns, importance: np.ndarray, document_frequency: np.ndarray
) -> pd.DataFrame:
    """One row per gradient-descent run of ``runs`` (step size, rounding, seed; keys of
    :data:`~attnbook.experiments.picture.GD_KEYS`): the budget, the training loss and
    test accuracy at its end, the picture's value trend and U, and the device and
    floating-point type it ran in."""
    rows = []
    for (key, seed), curve in sorted(runs.curves.items(), key=lambda kv: kv[0][1]):
        if key not in GD_KEYS:
            continue
        step, rounding = GD_KEYS[key]
        value, cls = runs.scores[(key, seed)]
        corr = picture_correlations(importance, value, cls, document_frequency)
        end = curve.at(max(curve.steps))
        device, dtype = runs.kinds[(key, seed)]
        rows.append(
            {
                "step size": f"η/{GD_STEPS[step][0]}",
                "rounding": rounding,
                "seed": seed,
                "steps": max(curve.steps),
                "training loss": end["train_loss"],
                "test accuracy": end["test_accuracy"],
                PICTURE_STATISTICS["value"]: corr["value"],
                PICTURE_STATISTICS["cls"]: corr["cls"],
                "device": device,
                "dtype": dtype,
            }
        )
    return pd.DataFrame(rows).set_index(["step size", "rounding", "seed"]).sort_index()


_ROUNDINGS = {"one-sweep step": "fused", "autograd step": "autograd"}


def gd_quotes(table: pd.DataFrame) -> dict[str, float | str]:
    """Every run of a :func:`gd_table` in the record: its U, value trend and training
    loss, keyed ``gd_<step>_<rounding>_<seed>_<number>`` (``step`` as in
    :data:`GD_STEPS`, ``rounding`` ``fused`` or ``autograd``), and the devices and
    floating-point types the runs ran in (``gd_devices``)."""
    steps = {f"η/{div}": step for step, (div, _) in GD_STEPS.items()}
    numbers = {
        "u": PICTURE_STATISTICS["cls"],
        "value": PICTURE_STATISTICS["value"],
        "train_loss": "training loss",
    }
    out: dict[str, float | str] = {}
    for (step, rounding, seed), row in table.iterrows():
        run = f"gd_{steps[step]}_{_ROUNDINGS[rounding]}_{seed}"
        out |= {f"{run}_{k}": float(row[column]) for k, column in numbers.items()}
    kinds = sorted({f"{d} {t}" for d, t in zip(table["device"], table["dtype"])})
    out["gd_devices"] = ", ".join(kinds)
    return out


def styled_gd_table(table: pd.DataFrame):
    """A :func:`gd_table` (or several, concatenated) formatted for the page."""
    numbers = [c for c in table.columns if c not in ("steps", "device", "dtype")]
    return table.style.format("{:.3f}", subset=numbers)


@dataclass
class GDStatistics:
    """What the checks on gradient descent compare, over all its runs (seeds, step
    sizes, roundings): the largest U and its range, the smallest value trend and its
    range, the smallest U of the Adam-trained seeds, the largest training loss at each
    step size (keyed as :data:`GD_STEPS`), the number of runs and the smallest and
    largest U at each step size."""

    largest_u: float
    u_range: float
    smallest_value: float
    value_range: float
    adam_u: float
    loss: dict[str, float]
    n_runs: int
    u_by_step: dict[str, tuple[float, float]] = field(default_factory=dict)

    @property
    def u_gap(self) -> float:
        """The Adam-trained U (smallest seed) minus the largest U of gradient
        descent."""
        return self.adam_u - self.largest_u

    @property
    def quoted(self) -> dict[str, float]:
        """The numbers the text quotes, keyed ``gd_<number>``."""
        return {
            "gd_u_max": self.largest_u,
            "gd_u_min": self.largest_u - self.u_range,
            "gd_value_max": self.smallest_value + self.value_range,
            "gd_adam_u_min": self.adam_u,
            "gd_runs": self.n_runs,
            **{f"gd_loss_{step}": loss for step, loss in self.loss.items()},
            **{f"gd_u_min_{step}": lo for step, (lo, _) in self.u_by_step.items()},
            **{f"gd_u_max_{step}": hi for step, (_, hi) in self.u_by_step.items()},
        }


def gd_statistics(gd: pd.DataFrame, seeds_table: pd.DataFrame) -> GDStatistics:
    """:class:`GDStatistics` from a :func:`gd_table` and the Adam seeds' rows of a
    :func:`~attnbook.experiments.picture.correlation_table`."""
    if gd.empty:
        raise ValueError("no gradient-descent run in the table")
    U, VALUE = PICTURE_STATISTICS["cls"], PICTURE_STATISTICS["value"]
    adam = seeds_table.loc[[r for r in seeds_table.index if r.startswith("seed ")], U]
    by_step = gd.groupby(level="step size")["training loss"].max()
    u_step = gd.groupby(level="step size")[U].agg(["min", "max"])
    names = {f"η/{div}": step for step, (div, _) in GD_STEPS.items()}
    return GDStatistics(
        largest_u=float(gd[U].max()),
        u_range=float(gd[U].max() - gd[U].min()),
        smallest_value=float(gd[VALUE].min()),
        value_range=float(gd[VALUE].max() - gd[VALUE].min()),
        adam_u=float(adam.min()),
        loss={names.get(k, str(k)): float(v) for k, v in by_step.items()},
        n_runs=len(gd),
        u_by_step={
            names.get(k, str(k)): (float(r["min"]), float(r["max"]))
            for k, r in u_step.iterrows()
        },
    )


def null_noise_table(null_importance: np.ndarray, doc_freq: np.ndarray) -> pd.DataFrame:
    """Root mean square of the shuffled-label importance in five document-frequency
    bands beside the mean of ``1 / sqrt(n)`` over each band."""
    bands = pd.qcut(doc_freq, 5)
    frame = pd.DataFrame({"I": null_importance, "n": doc_freq, "band": bands})
    groups = frame.groupby("band", observed=True)
    return pd.DataFrame(
        {
            "rms of the null I": groups["I"].apply(
                lambda x: float(np.sqrt((x**2).mean()))
            ),
            "mean of 1/sqrt(n)": groups["n"].apply(
                lambda n: float((1 / np.sqrt(n)).mean())
            ),
        }
    )


def quartile_table(
    cls: np.ndarray, importance: np.ndarray, doc_freq: np.ndarray
) -> pd.Series:
    """``rho(E_s . p, |I|)`` within each quartile of the document frequency."""
    quartile = pd.qcut(doc_freq, 4, labels=False)
    return pd.Series(
        {
            f"quartile {q + 1}": spearman(
                cls[quartile == q], np.abs(importance[quartile == q])
            )
            for q in range(4)
        },
        name="ρ(E·p, |I|) within the quartile",
    )


def outer_bins(importance: np.ndarray, n_bins: int = 20) -> pd.DataFrame:
    """Tokens in the first and last of ``n_bins`` bins, and in all, in each binning of
    :data:`BINNINGS`."""
    outer = {}
    for b, how in BINNINGS.items():
        lo, hi = bin_range(importance, how)
        counts = bin_statistics(importance, np.zeros(importance.size), n_bins, lo, hi)[
            "count"
        ]
        outer[b] = {
            "first bin": int(counts.iloc[0]),
            "last bin": int(counts.iloc[-1]),
            "all bins": int(counts.sum()),
        }
    return pd.DataFrame(outer).T


def picture_descriptions(name: str, n_seeds: int, n_null: int) -> dict[str, str]:
    """The words of the picture's checks on the data set ``name``, by check name."""
    D = NAMES[name]
    neg, pos = PICTURE_MATH["cls_neg"], PICTURE_MATH["cls_pos"]
    what = {
        f"{name}_cls_neg_side": f"largest over seeds of {neg}, {D}",
        f"{name}_cls_pos_side": f"smallest over seeds of {pos}, {D}",
        f"{name}_init_rho_max": "largest |ρ| of the picture at the initialization, "
        f"{D} (null: 1/√V)",
    }
    for key in MAIN_STATISTICS:
        math = PICTURE_MATH[key]
        what[f"{name}_{key}_min_seed"] = (
            f"smallest over {n_seeds} seeds of {math}, trained model, {D}"
        )
        what[f"{name}_{key}_above_null"] = (
            f"{math}: smallest seed minus the largest of {n_null} shuffled-label "
            f"runs, {D}"
        )
    return what


#: The runs set against the Adam-trained U: run key -> the slug of its check.
U_CONTROLS = {"theorem": "trained_E", "head": "trained_E_head"}
_WITHOUT_U = {
    "trained_E": "the theorem's setting (p alone on the one-step E)",
    "trained_E_head": "p and v trained on the one-step E",
}


def ablation_descriptions(name: str, n_gd: int) -> dict[str, str]:
    """The words of the checks on the runs of the ablation on the data set ``name``,
    by check name (``n_gd`` gradient-descent runs)."""
    D, U = NAMES[name], PICTURE_MATH["cls"]
    runs = f"{n_gd} gradient-descent runs (seeds, step sizes, roundings)"
    what = {
        f"{name}_one_rho_value_alpha": f"ρ(E·v, α) after one gradient step, {D}",
        f"{name}_gd_value_trend": f"{PICTURE_MATH['value']}: smallest of {runs}, {D}",
        f"{name}_u_needs_adam": f"{U}: smallest Adam-trained seed minus the largest "
        f"of {runs}, {D}",
        f"{name}_gd_u_range": f"{U}: largest difference between two of {runs} (the "
        f"same dynamics: no U to gain), {D}",
        f"{name}_gd_stable_loss": "largest training loss of gradient descent at the "
        f"smaller step size, at most the largest at the edge step (the budget fits as "
        f"much), {D}",
        f"{name}_u_between_seeds": f"{U}: largest difference between two Adam-trained "
        f"seeds (the same training: no U to gain), {D}",
    }
    for slug, words in _WITHOUT_U.items():
        what[f"{name}_u_needs_{slug}"] = f"{U}: Adam-trained model minus {words}, {D}"
    return what


_QUOTED_COLUMNS = {
    PICTURE_STATISTICS["cls"]: "cls",
    PICTURE_STATISTICS["value"]: "value",
    "ρ(E·v, α)": "value_alpha",
    "training loss": "train_loss",
    "test accuracy": "test_accuracy",
    "median documents, top 20 |E·v|": "top_docs",
    "tokens near the largest |E·v| (%)": "saturated_pct",
}


def run_quotes(rows: pd.DataFrame) -> dict[str, float]:
    """The numbers of a :func:`run_table` the text quotes, keyed ``<run>_<number>``."""
    return {
        f"{key}_{slug}": float(rows.loc[RUN_NAMES[key], column])
        for key in ("gd", "gd_autograd", "adam", "theorem", "head")
        for column, slug in _QUOTED_COLUMNS.items()
    }


def styled_run_table(table: pd.DataFrame):
    """A :func:`run_table` (or several, concatenated) formatted for the page."""
    documents = [c for c in table.columns if "documents" in c]
    return (
        table.style.format("{:.3f}", na_rep="–")
        .format("{:,.0f}", subset=documents)
        .format("{:.1f}", subset=["tokens near the largest |E·v| (%)"])
    )
