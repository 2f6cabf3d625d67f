"""The tables of the one-step chapter, each from runs of
:mod:`attnbook.theory.one_step_check`: the lemma's regime (measured and predicted
correlation), the fitted error slopes, the class-token coefficient per seed, the
correlations of the K-class step, and two steps in a row."""

from __future__ import annotations

from typing import Mapping

import numpy as np
import pandas as pd
import torch

from attnbook.engine.counts import TokenCounts
from attnbook.models.attention import count_attention_output
from attnbook.theory.one_step import one_gradient_step
from attnbook.theory.one_step_check import (
    OneStepResult,
    loglog_slope,
    loglog_slope_se,
    pearson,
    predicted_pearson,
    run_one_step,
    seeded_one_step_init,
)

__all__ = [
    "regime_row",
    "slope_table",
    "cls_step_row",
    "kclass_correlations",
    "two_steps_row",
    "dimension_table",
]


def regime_row(result: OneStepResult, init_scale: float, dim: int) -> dict[str, float]:
    """The measured Pearson r of ``E^1 . v`` with ``(eta/2) alpha ||v||^2``, the
    lemma's ``r*`` at ``init_scale`` and ``dim``, and the relative increment error."""
    return {
        "Pearson r (measured)": pearson(result.value1, result.pred_value),
        "r* (lemma)": predicted_pearson(result.pred_value, init_scale, result.vv, dim),
        "relative increment error": result.relative_increment_error,
    }


def slope_table(
    fits: Mapping[str, tuple[pd.DataFrame, str, str, float]],
) -> pd.DataFrame:
    """For each ``label -> (frame, x, y, predicted)``: the predicted log-log slope of
    column ``y`` on column ``x``, the slope fitted over all rows and its standard
    error; one row per label."""
    rows = {
        label: {
            "predicted": predicted,
            "fitted": loglog_slope(frame[x], frame[y]),
            "standard error": loglog_slope_se(frame[x], frame[y]),
        }
        for label, (frame, x, y, predicted) in fits.items()
    }
    return pd.DataFrame.from_dict(rows, orient="index")


def cls_step_row(result: OneStepResult, eta: float) -> dict[str, float]:
    """The fitted coefficients of ``alpha_s`` in the changes of ``E_s . p`` and
    ``E_s . v``, the coefficient ``(eta/2) v . p`` the class-token lemma predicts, and
    the spreads of ``E^0 . p`` and of its change, for one run."""
    change_p = result.cls1 - result.cls0
    coef_p = np.polyfit(result.alpha, change_p, 1)[0]
    coef_v = np.polyfit(result.alpha, result.value1 - result.value0, 1)[0]
    return {
        "v.p": result.vp,
        "coef_p": coef_p,
        "predicted coef_p": eta / 2 * result.vp,
        "coef_p / coef_v": coef_p / coef_v,
        "sd(E0.p)": result.cls0.std(),
        "sd(change of E.p)": change_p.std(),
    }


def kclass_correlations(results: Mapping[str, dict[str, np.ndarray]]) -> pd.DataFrame:
    """Pearson r of the measured ``E^1 . v_k`` with the diagonal prediction and with
    the prediction with cross terms, and of the increment with the latter; one row per
    run of :func:`~attnbook.theory.one_step_check.run_one_step_multiclass`."""
    columns = {
        "r(measured, diagonal)": ("measured", "diagonal"),
        "r(measured, with cross terms)": ("measured", "full"),
        "r(increment, with cross terms)": ("increment", "full"),
    }
    return pd.DataFrame(
        {
            name: [pearson(r[a], r[b]) for r in results.values()]
            for name, (a, b) in columns.items()
        },
        index=list(results),
    )


def two_steps_row(
    counts: TokenCounts,
    labels: object,
    alpha: torch.Tensor,
    dim: int,
    init_scale: float,
    eta: float,
) -> dict[str, float]:
    """Two gradient steps of size ``eta`` on ``E`` from the seed-0 initialization: the
    largest output after the first, and the slope of ``E^2 . v`` on ``eta alpha
    ||v||^2`` (twice the one-step prediction)."""
    params = seeded_one_step_init(counts, dim, 0, init_scale=init_scale)
    E1 = one_gradient_step(params, counts, labels, eta)
    E2 = one_gradient_step({**params, "E": E1}, counts, labels, eta)
    v0 = params["v"]
    twice = (eta * alpha.double() * (v0 @ v0)).numpy()
    f1 = count_attention_output(E1, params["p"], v0, counts)
    return {
        "eta": eta,
        "max |f| after step 1": float(f1.abs().max()),
        "slope of E^2.v on eta alpha ||v||^2": float(
            np.polyfit(twice, (E2 @ v0).numpy(), 1)[0]
        ),
    }


def dimension_table(
    counts: TokenCounts,
    labels: torch.Tensor,
    alpha: torch.Tensor,
    dims: tuple[int, ...],
    *,
    init_scale: float,
    eta: float,
    device: torch.device | str | None = None,
) -> pd.DataFrame:
    """One float32 step at every dimension of ``dims`` (seeded with the dimension): the
    measured Pearson r of ``E^1 . v`` with ``(eta/2) alpha ||v||^2`` beside the
    noise-only prediction; one row per ``d``."""
    rows = []
    for d in dims:
        r = run_one_step(
            counts,
            labels,
            d,
            init_scale=init_scale,
            eta=eta,
            seed=d,
            dtype=torch.float32,
            device=device,
            alpha=alpha,
        )
        rows.append(
            {
                "d": d,
                "d / V": d / counts.vocab_size,
                "r measured": pearson(r.value1, r.pred_value),
                "r predicted (noise only)": predicted_pearson(
                    r.pred_value, init_scale, r.vv, d
                ),
            }
        )
    return pd.DataFrame(rows).set_index("d")
