"""The one-step lemma measured: a seeded small initialization, one step, and the scores
before and after it next to the lemma's predictions (binary and K-class), over sweeps of
the dimension and the initialization scale; and the statistics that compare them
(Pearson correlation with its predicted value under the lemma's noise model, log-log
slopes)."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from attnbook.engine.counts import TokenCounts
from attnbook.models.parameters import init_parameters
from attnbook.theory.frequency import average_signed_frequency
from attnbook.theory.one_step import (
    class_signed_frequency,
    first_order_coefficients,
    one_gradient_step,
    one_gradient_step_multiclass,
    predicted_class_alignment,
    predicted_cls_alignment,
    predicted_value_alignment,
)
from attnbook.validation import ArgumentTypeError, check_count, check_finite_real

__all__ = [
    "one_step_layout",
    "init_one_step",
    "seeded_one_step_init",
    "OneStepResult",
    "run_one_step",
    "run_one_step_multiclass",
    "sweep_one_step",
    "predicted_pearson",
    "pearson",
    "loglog_slope",
    "loglog_slope_se",
]


def one_step_layout(
    vocab_size: int,
    dim: int,
    scale: float,
    *,
    head_scale: float = 1.0,
    n_classes: int | None = None,
) -> dict[str, tuple[tuple[int, ...], float]]:
    """The layout of the one-step lemma: ``E`` with std ``scale / sqrt(d)`` (the small
    initialization), ``p`` with std ``1 / sqrt(d)``, and the head with std ``head_scale
    / sqrt(d)``: ``v`` of shape ``(d,)``, or ``W`` of shape ``(d, K)`` for ``n_classes =
    K``."""
    head = ("v", (dim,)) if n_classes is None else ("W", (dim, int(n_classes)))
    return {
        "E": ((vocab_size, dim), scale / dim**0.5),
        "p": ((dim,), 1.0 / dim**0.5),
        head[0]: (head[1], head_scale / dim**0.5),
    }


def init_one_step(
    vocab_size: int,
    dim: int,
    *,
    init_scale: float,
    cls_scale: float = 1.0,
    head_scale: float = 1.0,
    n_classes: int | None = None,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> dict[str, torch.Tensor]:
    """The initialization of the one-step lemma, drawn by
    :func:`attnbook.models.parameters.init_parameters` with :func:`one_step_layout`.

    ``E`` has i.i.d. ``N(0, init_scale^2 / d)`` entries, ``p`` i.i.d. ``N(0, cls_scale^2
    / d)`` (drawn at unit scale and multiplied by ``cls_scale``, so that ``E`` and the
    head do not depend on it; exactly zero when ``cls_scale == 0``), and the head i.i.d.
    ``N(0, head_scale^2 / d)``. The tensors are plain (no gradient required).
    """
    scales = dict(init_scale=init_scale, head_scale=head_scale, cls_scale=cls_scale)
    for name, value in scales.items():
        check_finite_real(value, name)
    if not init_scale > 0 or not head_scale > 0 or not cls_scale >= 0:
        raise ValueError(
            "init_scale and head_scale must be positive, cls_scale non-negative"
        )
    if n_classes is not None:
        n_classes = check_count(n_classes, "n_classes", minimum=2)
    layout = functools.partial(
        one_step_layout, head_scale=head_scale, n_classes=n_classes
    )
    out = init_parameters(
        vocab_size,
        dim,
        scale=init_scale,
        generator=generator,
        dtype=dtype,
        device=device,
        layout=layout,
        requires_grad=False,
    )
    out["p"] = out["p"] * cls_scale
    return out


@dataclass(frozen=True)
class OneStepResult:
    """Scores before and after one step of a binary problem, and the lemma's
    predictions.

    All arrays are float64 NumPy ``(V,)``: ``value0 = E^0 . v``, ``value1 = E^1 . v``,
    ``cls0 = E^0 . p``, ``cls1 = E^1 . p``, ``alpha``, ``pred_value = (eta/2) alpha
    ||v||^2``, ``pred_cls = (eta/2) alpha (v . p)``; ``vp = v . p`` and ``vv =
    ||v||^2``.
    """

    value0: np.ndarray
    value1: np.ndarray
    cls0: np.ndarray
    cls1: np.ndarray
    alpha: np.ndarray
    pred_value: np.ndarray
    pred_cls: np.ndarray
    vp: float
    vv: float
    first_order_increment: np.ndarray | None = None

    @property
    def total_error(self) -> float:
        """RMS over tokens of ``E^1 . v - (eta/2) alpha ||v||^2``."""
        return float(np.sqrt(np.mean((self.value1 - self.pred_value) ** 2)))

    @property
    def increment_error(self) -> float:
        """RMS over tokens of ``(E^1 - E^0) . v - (eta/2) alpha ||v||^2``."""
        return float(
            np.sqrt(np.mean((self.value1 - self.value0 - self.pred_value) ** 2))
        )

    @property
    def second_order_error(self) -> float:
        """RMS over tokens of ``(E^1 - E^0) . v`` minus its first-order expansion ``eta
        (c_v1 ||v||^2 + c_p1 v . p)`` (:func:`first_order_coefficients`)."""
        if self.first_order_increment is None:
            raise ValueError(
                "this result was computed without the first-order expansion"
            )
        diff = self.value1 - self.value0 - self.first_order_increment
        return float(np.sqrt(np.mean(diff**2)))

    @property
    def relative_increment_error(self) -> float:
        """``increment_error`` divided by the RMS of the prediction."""
        return self.increment_error / float(np.sqrt(np.mean(self.pred_value**2)))


def seeded_one_step_init(
    counts: TokenCounts, dim: int, seed: int, **options
) -> dict[str, torch.Tensor]:
    """:func:`init_one_step` for the vocabulary of ``counts``, from a torch generator
    seeded with ``seed``."""
    if not isinstance(counts, TokenCounts):
        raise ArgumentTypeError(
            f"counts must be a TokenCounts, got {type(counts).__name__}"
        )
    gen = torch.Generator().manual_seed(check_count(seed, "seed", minimum=0))
    return init_one_step(counts.vocab_size, dim, generator=gen, **options)


def _np64(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu", torch.float64).numpy()


def run_one_step(
    counts: TokenCounts,
    labels: object,
    dim: int,
    *,
    init_scale: float,
    eta: float,
    cls_scale: float = 1.0,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
    alpha: torch.Tensor | None = None,
) -> OneStepResult:
    """Initialize as in :func:`init_one_step` (torch generator seeded with ``seed``),
    take one exact gradient step on ``E`` and return the scores with the predictions.

    ``alpha`` may be passed when already computed (it depends on the data only).
    """
    params = seeded_one_step_init(
        counts,
        dim,
        seed,
        init_scale=init_scale,
        cls_scale=cls_scale,
        dtype=dtype,
        device=device,
    )
    if alpha is None:
        alpha = average_signed_frequency(counts, labels, counts.vocab_size)
    E1 = one_gradient_step(params, counts, labels, eta)
    E0, p, v = params["E"], params["p"], params["v"]
    c_v1, c_p1 = first_order_coefficients(E0, p, v, counts, labels)
    first = eta * (c_v1 * (v @ v) + c_p1 * (v @ p))

    return OneStepResult(
        value0=_np64(E0 @ v),
        value1=_np64(E1 @ v),
        cls0=_np64(E0 @ p),
        cls1=_np64(E1 @ p),
        alpha=_np64(alpha),
        pred_value=_np64(predicted_value_alignment(alpha, v, eta)),
        pred_cls=_np64(predicted_cls_alignment(alpha, v, p, eta)),
        vp=float(v @ p),
        vv=float(v @ v),
        first_order_increment=_np64(first),
    )


def run_one_step_multiclass(
    counts: TokenCounts,
    labels: object,
    n_classes: int,
    dim: int,
    *,
    init_scale: float,
    eta: float,
    cls_scale: float = 1.0,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> dict[str, np.ndarray]:
    """One step of the K-class model from :func:`init_one_step` (``W`` of shape ``(d,
    K)``).

    Returns float64 ``(V, K)`` arrays: ``measured`` ``E^1 . v_k``, ``increment`` ``(E^1
    - E^0) . v_k``, ``diagonal`` ``eta gamma_sk ||v_k||^2`` and ``full`` ``eta (gamma
    W^T W)_sk`` (:func:`predicted_class_alignment`), and ``gamma`` itself.
    """
    params = seeded_one_step_init(
        counts,
        dim,
        seed,
        init_scale=init_scale,
        cls_scale=cls_scale,
        n_classes=n_classes,
        dtype=dtype,
        device=device,
    )
    gamma = class_signed_frequency(counts, labels, n_classes, counts.vocab_size)
    E1 = one_gradient_step_multiclass(params, counts, labels, eta)
    W = params["W"]

    return {
        "measured": _np64(E1 @ W),
        "increment": _np64((E1 - params["E"]) @ W),
        "diagonal": _np64(predicted_class_alignment(gamma, W, eta, cross_terms=False)),
        "full": _np64(predicted_class_alignment(gamma, W, eta, cross_terms=True)),
        "gamma": gamma.numpy(),
    }


def sweep_one_step(
    counts: TokenCounts,
    labels: object,
    *,
    dims: Sequence[int],
    init_scales: Sequence[float],
    etas: Sequence[float] = (1.0,),
    seeds: Sequence[int] = (0,),
    cls_scale: float = 1.0,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
):
    """One row per (dim, init_scale, eta, seed) of :func:`run_one_step`, as a pandas
    DataFrame.

    Columns: ``dim, init_scale, eta, seed, total_error, increment_error,
    relative_increment_error, second_order_error, pearson`` (of ``E^1 . v`` with the
    prediction) and ``predicted_pearson`` (:func:`predicted_pearson`).
    """
    import pandas as pd

    alpha = average_signed_frequency(counts, labels, counts.vocab_size)
    rows = []
    for dim in dims:
        for scale in init_scales:
            for eta in etas:
                for seed in seeds:
                    r = run_one_step(
                        counts,
                        labels,
                        int(dim),
                        init_scale=float(scale),
                        eta=float(eta),
                        cls_scale=cls_scale,
                        seed=int(seed),
                        dtype=dtype,
                        device=device,
                        alpha=alpha,
                    )
                    rows.append(
                        {
                            "dim": int(dim),
                            "init_scale": float(scale),
                            "eta": float(eta),
                            "seed": int(seed),
                            "total_error": r.total_error,
                            "increment_error": r.increment_error,
                            "relative_increment_error": r.relative_increment_error,
                            "second_order_error": r.second_order_error,
                            "pearson": pearson(r.value1, r.pred_value),
                            "predicted_pearson": predicted_pearson(
                                r.pred_value, float(scale), r.vv, int(dim)
                            ),
                        }
                    )
    return pd.DataFrame(rows)


def predicted_pearson(
    prediction: object, init_scale: float, head_norm_sq: float, dim: int
) -> float:
    """Pearson correlation between ``E^1 . v`` and ``prediction`` expected from the
    lemma when the only noise is the initial score ``E^0_s . v ~ N(0, init_scale^2
    ||v||^2 / d)``, independent across tokens: ``sd(pred) / sqrt(sd(pred)^2 +
    init_scale^2 ||v||^2 / d)``."""
    pred = np.asarray(prediction, dtype=np.float64).ravel()
    dim = check_count(dim, "dim")
    if (
        pred.size < 2
        or not np.isfinite(pred).all()
        or not 0 <= init_scale < math.inf
        or not 0 < head_norm_sq < math.inf
    ):
        raise ValueError(
            "need >= 2 finite predictions, finite init_scale >= 0 and head_norm_sq > 0"
        )
    signal = float(pred.std())
    noise = init_scale**2 * head_norm_sq / dim
    return signal / float(np.sqrt(signal**2 + noise))


def pearson(x: object, y: object) -> float:
    """Pearson correlation of two equal-length 1-D arrays (flattened)."""
    a = np.asarray(x, dtype=np.float64).ravel()
    b = np.asarray(y, dtype=np.float64).ravel()
    if a.shape != b.shape or a.size < 2:
        raise ValueError("pearson needs two arrays of the same length >= 2")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("pearson needs finite values")
    if a.std() == 0 or b.std() == 0:
        raise ValueError("pearson is undefined for a constant array")
    return float(np.corrcoef(a, b)[0, 1])


def loglog_slope(x: Sequence[float], y: Sequence[float]) -> float:
    """Least-squares slope of ``log y`` against ``log x`` (all values must be positive).

    Repeated ``x`` values (several seeds) are allowed and enter the fit individually.
    """
    a = np.asarray(x, dtype=np.float64).ravel()
    b = np.asarray(y, dtype=np.float64).ravel()
    if a.shape != b.shape or a.size < 2:
        raise ValueError("loglog_slope needs two arrays of the same length >= 2")
    if (a <= 0).any() or (b <= 0).any() or not np.isfinite(np.r_[a, b]).all():
        raise ValueError("loglog_slope needs positive finite values")
    if np.unique(a).size < 2:
        raise ValueError("loglog_slope needs at least two distinct x values")
    return float(np.polyfit(np.log(a), np.log(b), 1)[0])


def loglog_slope_se(x: Sequence[float], y: Sequence[float]) -> float:
    """Standard error of :func:`loglog_slope` from the residuals of the fit (ordinary
    least squares, ``n - 2`` degrees of freedom; needs at least three points)."""
    slope = loglog_slope(x, y)
    a = np.log(np.asarray(x, dtype=np.float64).ravel())
    b = np.log(np.asarray(y, dtype=np.float64).ravel())
    if a.size < 3:
        raise ValueError("loglog_slope_se needs at least three points")
    resid = b - (slope * a + (b.mean() - slope * a.mean()))
    sxx = float(((a - a.mean()) ** 2).sum())
    return float(np.sqrt((resid**2).sum() / (a.size - 2) / sxx))
