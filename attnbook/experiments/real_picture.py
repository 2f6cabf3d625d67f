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
    "picture_descriptions",
    "ablation_descriptions",
    "U_CONTROLS",
    "GD_RUNS",
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
    gradient descent, the head-only controls and ``n_null`` shuffled-label runs, except
    on ``yelp_all`` (one seed, no controls)."""
    runs, etas = {}, {}
    for name, corpus in corpora.items():
        eta = one_step_eta(alpha[name], dim, sigma)
        config = ReviewExperimentConfig(dim=dim, init_scale=sigma, eta=eta)
        gd = Dynamics("gd", {"E": eta / 10, "p": 0.3, "v": 0.3})
        settings = (
            PictureSettings(seeds=(0,), controls=False)
            if name == "yelp_all"
            else PictureSettings(
                seeds=(0, 1, 2), gd=gd, head_steps=300, null_permutations=n_null
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
U_CONTROLS = {
    "theorem": "trained_E",
    "head": "trained_E_head",
    "gd": "adam",
    "gd_autograd": "adam_autograd",
}
#: The gradient-descent runs, each in one rounding: run key -> the slug of its checks.
GD_RUNS = {"gd": "gd", "gd_autograd": "gd_autograd"}
_WITHOUT_U = {
    "trained_E": "the theorem's setting (p alone on the one-step E)",
    "trained_E_head": "p and v trained on the one-step E",
    "adam": "the gradient-descent-trained model (one-sweep step)",
    "adam_autograd": "the gradient-descent-trained model (autograd step)",
}


def ablation_descriptions(name: str) -> dict[str, str]:
    """The words of the checks on the runs of the ablation, by check name."""
    D = NAMES[name]
    what = {
        f"{name}_one_rho_value_alpha": f"ρ(E·v, α) after one gradient step, {D}",
        **{
            f"{name}_{slug}_value_trend": f"{PICTURE_MATH['value']} of the "
            f"gradient-descent-trained model ({step}), {D}"
            for slug, step in zip(GD_RUNS.values(), ("one-sweep step", "autograd step"))
        },
    }
    for slug, words in _WITHOUT_U.items():
        what[f"{name}_u_needs_{slug}"] = (
            f"{PICTURE_MATH['cls']}: Adam-trained model minus {words}, {D}"
        )
    what[f"{name}_u_between_seeds"] = (
        f"{PICTURE_MATH['cls']}: largest difference between two Adam-trained seeds "
        f"(the same training: no U to gain), {D}"
    )
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
