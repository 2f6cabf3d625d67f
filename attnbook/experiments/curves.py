"""Learning curves of the one-layer model, full-batch Adam or gradient descent
(:class:`Dynamics`): loss, accuracy and token scores at the evaluation steps."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np
import pandas as pd
import torch

from attnbook.data.corpus import ReviewCorpus
from attnbook.engine.fused import fused_one_layer_step, torch_optimizer
from attnbook.experiments.evaluation import evaluate_binary
from attnbook.experiments.importance import mean_within_bin_std
from attnbook.models.training import binary_loss_closure, training_step

__all__ = [
    "Dynamics",
    "log_steps",
    "Curve",
    "train_curve",
    "first_step_reaching",
    "spread_curves",
    "SPREAD_READINGS",
    "ABLATIONS",
    "ablation_curves",
]

_GROUPS = ("E", "p", "v")


@dataclass(frozen=True)
class Dynamics:
    """``optimizer`` (``"adam"`` or ``"gd"``, full-batch) and a positive step size
    ``lr[group]`` for each of ``E``, ``p``, ``v`` it may train."""

    optimizer: str
    lr: Mapping[str, float]

    def __post_init__(self) -> None:
        if self.optimizer not in ("adam", "gd"):
            raise ValueError(
                f"optimizer must be 'adam' or 'gd', got {self.optimizer!r}"
            )
        if unknown := sorted(set(self.lr) - set(_GROUPS)):
            raise ValueError(f"lr names unknown parameter groups {unknown}")
        for name, value in self.lr.items():
            if not (isinstance(value, (int, float)) and 0 < value < np.inf):
                raise ValueError(f"lr[{name!r}] must be a positive number, got {value}")

    @classmethod
    def adam(cls, lr: float) -> "Dynamics":
        """Adam with one step size for every group."""
        return cls("adam", {g: lr for g in _GROUPS})


def log_steps(budget: int, per_decade: int = 6) -> tuple[int, ...]:
    """Step 0 and about ``per_decade`` integer steps per decade from 1 to ``budget``."""
    if budget < 1:
        raise ValueError(f"budget must be at least 1, got {budget}")
    n = int(np.ceil(np.log10(budget) * per_decade)) + 1 if budget > 1 else 1
    steps = np.unique(np.round(np.logspace(0, np.log10(budget), n)).astype(int))
    return (0, *(int(s) for s in steps))


@dataclass
class Curve:
    """``metrics["<split>_<loss|accuracy|balanced_accuracy>"]`` and ``scores[step] =
    (E.v, E.p)`` at the evaluation ``steps``; the final ``params``; ``step_losses[t]``,
    the training loss step ``t + 1`` computed before its update."""

    steps: list[int] = field(default_factory=list)
    metrics: dict[str, list[float]] = field(default_factory=dict)
    scores: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    params: dict[str, torch.Tensor] = field(default_factory=dict)
    step_losses: list[float] = field(default_factory=list)

    def at(self, step: int) -> dict[str, float]:
        """The metrics recorded at ``step``."""
        if step not in self.steps:
            raise ValueError(f"step {step} is not an evaluation step of this curve")
        j = self.steps.index(step)
        return {k: v[j] for k, v in self.metrics.items()}


def _scores(params: Mapping[str, torch.Tensor]) -> tuple[np.ndarray, np.ndarray]:
    with torch.no_grad():
        s = params["E"] @ torch.stack((params["v"], params["p"]), dim=1)
    s = s.to("cpu", torch.float64).numpy()
    return s[:, 0].copy(), s[:, 1].copy()


def train_curve(
    params: Mapping[str, torch.Tensor],
    corpus: ReviewCorpus,
    *,
    trainable: tuple[str, ...],
    dynamics: Dynamics,
    eval_steps: tuple[int, ...],
    splits: tuple[str, ...] = ("train", "test"),
    fused: bool = True,
) -> Curve:
    """Train copies of ``params[trainable]`` on the logistic loss of ``corpus.train``
    for ``max(eval_steps)`` steps of ``dynamics``, recording each split of ``splits``
    at ``eval_steps``. With ``fused`` a step sweeps over ``E`` once where it can
    (:func:`~attnbook.engine.fused.fused_one_layer_step`); else autograd."""
    if not trainable or set(trainable) - set(_GROUPS):
        raise ValueError(f"trainable must name groups among {_GROUPS}, got {trainable}")
    missing = [g for g in trainable if g not in dynamics.lr]
    if missing:
        raise ValueError(f"no step size for the trained groups {missing}")
    if not eval_steps or min(eval_steps) < 0:
        raise ValueError("eval_steps must be non-empty and non-negative")
    P = {k: t.detach().clone() for k, t in params.items()}
    for name, t in P.items():
        t.requires_grad_(name in trainable)
    device, dtype = P["E"].device, P["E"].dtype

    def split(s: str) -> tuple:
        y = corpus.labels(s, dtype=dtype, device=device)
        return getattr(corpus, s).to(device), y

    data = {s: split(s) for s in splits}
    train = data["train"] if "train" in data else split("train")
    step_once = None
    if fused:  # None where the one-sweep step does not apply
        step_once = fused_one_layer_step(
            P, *train, optimizer=dynamics.optimizer, lr=dynamics.lr, trainable=trainable
        )
    if step_once is None:
        loss_fn = binary_loss_closure(P, *train)
        groups = [{"params": [P[g]], "lr": float(dynamics.lr[g])} for g in trainable]
        opt = torch_optimizer(dynamics.optimizer, groups)
    wanted, curve = set(eval_steps), Curve()

    def record(step: int) -> None:
        curve.steps.append(step)
        with torch.no_grad():
            for name, (counts, y) in data.items():
                ev = evaluate_binary(P, counts, y)
                for m in ("loss", "accuracy", "balanced_accuracy"):
                    curve.metrics.setdefault(f"{name}_{m}", []).append(float(ev[m]))
        curve.scores[step] = _scores(P)

    if 0 in wanted:
        record(0)
    for step in range(1, max(eval_steps) + 1):
        if step_once is not None:
            loss = step_once(step)
        else:
            loss = training_step(opt, loss_fn, step)
        curve.step_losses.append(float(loss))
        if step in wanted:
            record(step)
    curve.params = {k: t.detach().clone() for k, t in P.items()}
    return curve


def first_step_reaching(
    curve: Curve, metric: str, target: float, *, below: bool
) -> int | None:
    """The first evaluation step with ``metric`` at most (``below``) or at least
    ``target``, or ``None``."""
    if metric not in curve.metrics:
        raise ValueError(f"the curve has no metric {metric!r}")
    for step, value in zip(curve.steps, curve.metrics[metric]):
        if (value <= target) if below else (value >= target):
            return step
    return None


#: The readings of "the average within-bin standard deviation" of a score.
SPREAD_READINGS = {
    "tokens": "mean over tokens",
    "bins": "mean over bins",
    "scale-free": "mean over tokens / std of the score",
}


def _spread(
    x: np.ndarray, values: np.ndarray, reading: str, lo: float, hi: float, n_bins: int
) -> float:
    weighting = "bins" if reading == "bins" else "tokens"
    s = mean_within_bin_std(x, values, n_bins, lo, hi, weighting=weighting)
    return s / float(values.std()) if reading == "scale-free" else s


def spread_curves(
    importance: object,
    numerator: Curve,
    denominator: Curve,
    *,
    lo: float,
    hi: float,
    n_bins: int = 20,
) -> pd.DataFrame:
    """The within-bin spread of each score under ``numerator`` over that under
    ``denominator`` at every shared step >= 1, in each of :data:`SPREAD_READINGS`:
    columns ``step``, ``score``, ``reading``, ``ratio``."""
    x = np.asarray(importance, dtype=np.float64)
    keep = np.isfinite(x)
    rows = []
    for step in sorted(set(numerator.scores) & set(denominator.scores) - {0}):
        for j, score in enumerate(("E.v", "E.p")):
            a = numerator.scores[step][j][keep]
            b = denominator.scores[step][j][keep]
            for reading in SPREAD_READINGS:
                ratio = _spread(x[keep], a, reading, lo, hi, n_bins) / _spread(
                    x[keep], b, reading, lo, hi, n_bins
                )
                rows.append(
                    {"step": step, "score": score, "reading": reading, "ratio": ratio}
                )
    return pd.DataFrame(rows)


#: The ablations: key -> (name, starting point, trained groups).
ABLATIONS = {
    "full": ("trained E", "init", ("E", "p", "v")),
    "random_E": ("random fixed E", "random_E", ("p", "v")),
    "one_step_head": ("one step, then frozen E", "one_step", ("p", "v")),
}


def ablation_curves(
    corpus: ReviewCorpus,
    points: Mapping[str, Mapping[str, torch.Tensor]] | object,
    dynamics: Mapping[str, Dynamics],
    eval_steps: tuple[int, ...],
    *,
    models: tuple[str, ...] = tuple(ABLATIONS),
) -> dict[tuple[str, str], Curve]:
    """The curve of each of ``models`` under each ``dynamics[label]``, from
    ``points[start]``, keyed ``(model, label)``."""
    unknown = set(models) - set(ABLATIONS)
    if unknown:
        raise ValueError(
            f"unknown models {sorted(unknown)}; choose among {list(ABLATIONS)}"
        )
    out = {}
    for label, dyn in dynamics.items():
        for key in models:
            _, start, trainable = ABLATIONS[key]
            out[(key, label)] = train_curve(
                points[start],
                corpus,
                trainable=trainable,
                dynamics=dyn,
                eval_steps=eval_steps,
            )
    return out
