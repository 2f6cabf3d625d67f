"""The picture on synthetic data beside the real one, for the real-data chapter:
:func:`synthetic_runs` trains the picture's model on synthetic data as drawn and
conditioned on Assumption 1, :func:`synthetic_spread_table` sets its rank correlations
and relative within-bin spreads beside those of the real corpora."""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd
import torch

from attnbook.experiments.importance import (
    spearman,
    token_importance,
    within_bin_spread,
)
from attnbook.experiments.picture import PictureRuns, PictureSettings, picture_runs
from attnbook.experiments.real_data import ReviewExperimentConfig
from attnbook.experiments.real_picture import NAMES, one_step_eta
from attnbook.experiments.robustness import PICTURE_MATH
from attnbook.experiments.synthetic_picture import (
    one_relevant_spec,
    relevant_per_sequence,
    synthetic_corpus,
)
from attnbook.theory.frequency import average_signed_frequency

__all__ = [
    "synthetic_runs",
    "synthetic_spread_table",
    "synthetic_descriptions",
    "spread_quotes",
    "styled_spread_table",
]


def synthetic_runs(
    dim: int, sigma: float, device: torch.device | str | None = None
) -> dict[str, tuple[np.ndarray, PictureRuns, np.ndarray]]:
    """The picture's model (one seed) on synthetic data with 100 completely positive,
    100 completely negative and 2,000 neutral tokens, sequences of 100 tokens, drawn
    with seed 11, as drawn and conditioned on Assumption 1. Per sample: the importance,
    the runs and the number of relevant tokens of every sequence."""
    spec = one_relevant_spec(100, 2000, 100)
    out = {}
    for label, exactly_one in (
        ("as drawn", False),
        ("conditioned on Assumption 1", True),
    ):
        corpus, sample = synthetic_corpus(
            spec, 5000, 2000, np.random.default_rng(11), exactly_one=exactly_one
        )
        imp = token_importance(corpus.train, corpus.train_labels)
        a = average_signed_frequency(
            corpus.train, corpus.train_labels, corpus.vocab_size
        )
        eta = one_step_eta(a.numpy()[np.isfinite(imp)], dim, sigma)
        cfg = ReviewExperimentConfig(dim=dim, init_scale=sigma, eta=eta)
        res = picture_runs(
            corpus,
            cfg,
            PictureSettings(seeds=(0,), controls=False),
            null_rng=np.random.default_rng(5),
            device=device,
        )
        out[label] = (imp, res, relevant_per_sequence(sample))
    return out


def _spread_row(importance: np.ndarray, value: np.ndarray, cls: np.ndarray) -> dict:
    return {
        "ρ(E·v, I)": spearman(value, importance),
        "ρ(E·p, |I|)": spearman(cls, np.abs(importance)),
        "relative spread of E·v": within_bin_spread(importance, value),
        "relative spread of E·p": within_bin_spread(importance, cls),
    }


def synthetic_spread_table(
    synthetic: Mapping[str, tuple[np.ndarray, PictureRuns, np.ndarray]],
    real: Mapping[str, tuple[np.ndarray, PictureRuns]],
    seed: int,
) -> pd.DataFrame:
    """The rank correlations of the picture and the relative within-bin spread of both
    scores on every synthetic sample (first seed) and every ``real`` corpus (its
    ``seed``), one row each."""
    rows = {}
    for label, (imp, res, k) in synthetic.items():
        keep = np.isfinite(imp)
        value, cls = (s[keep] for s in res.scores[("adam", 0)])
        rows[f"synthetic, {label}"] = {
            "sequences with one relevant token (%)": 100 * float((k == 1).mean()),
            **_spread_row(imp[keep], value, cls),
        }
    for name, (imp, res) in real.items():
        value, cls = res.scores[("adam", seed)]
        rows[name] = {
            "sequences with one relevant token (%)": np.nan,
            **_spread_row(imp, value, cls),
        }
    return pd.DataFrame(rows).T


def synthetic_descriptions() -> dict[str, str]:
    """The words of the checks on synthetic data, by check name."""
    what = {
        f"synthetic_rho_{key}": f"{PICTURE_MATH[key]}, trained model, synthetic data "
        "conditioned on Assumption 1"
        for key in ("value", "cls")
    }
    for slug, math in (("value", r"$\E_s \cdot \bv$"), ("cls", r"$\E_s \cdot \bp$")):
        what[f"synthetic_{slug}_spread_ratio"] = (
            f"relative within-bin spread of {math}: synthetic (conditioned) over IMDB"
        )
    return what


def spread_quotes(table: pd.DataFrame) -> dict[str, float]:
    """The numbers of a :func:`synthetic_spread_table` the text quotes: the share of
    drawn sequences with one relevant token, and the relative spreads of both scores
    on the conditioned synthetic data and on IMDB."""
    quoted = {
        "synthetic_one_pct": table.loc[
            "synthetic, as drawn", "sequences with one relevant token (%)"
        ]
    }
    for prefix, row in (
        ("synthetic", "synthetic, conditioned on Assumption 1"),
        ("imdb", NAMES["imdb"]),
    ):
        for slug, score in (("value", "E·v"), ("cls", "E·p")):
            quoted[f"{prefix}_{slug}_spread"] = table.loc[
                row, f"relative spread of {score}"
            ]
    return quoted


def styled_spread_table(table: pd.DataFrame):
    """A :func:`synthetic_spread_table` formatted for the page."""
    return table.style.format("{:.3f}", na_rep="").format(
        "{:.1f}", subset=["sequences with one relevant token (%)"], na_rep="–"
    )
