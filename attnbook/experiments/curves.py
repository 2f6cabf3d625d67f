"""Learning curves of the one-layer model, full-batch Adam or gradient descent
(:class:`Dynamics`): loss, accuracy and token scores at the evaluation steps."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

import numpy as np
import pandas as pd
import torch

from attnbook.data.corpus import ReviewCorpus
from attnbook.engine.counts import TokenCounts
from attnbook.engine.fused import fused_one_layer_step, torch_optimizer
from attnbook.experiments.importance import mean_within_bin_std
from attnbook.models.attention import attention_output
from attnbook.models.losses import logistic_loss
from attnbook.models.training import binary_loss_closure, training_step
from attnbook.validation import check_outputs_and_labels

_GROUPS = ("E", "p", "v")


@dataclass(frozen=True)
class Dynamics:
    """``optimizer`` (``"adam"`` or ``"gd"``, full-batch) and a positive step size
    ``lr[group]`` for each of ``E``, ``p``, ``v`` it may train."""

    optimizer: str
    lr: Mapping[str, float]

    def __post_init__(self) -> None:
        if self.optimizer not in ("adam", "gd"):
            raise ValueError(f"optimizer must be 'adam' or 'gd', not {self.optimizer}")
        if unknown := sorted(set(self.lr) - set(_GROUPS)):
            raise ValueError(f"lr names unknown parameter groups {unknown}")
        if not all(
            isinstance(x, (int, float)) and 0 < x < np.inf for x in self.lr.values()
        ):
            raise ValueError(f"every step size must be a positive number: {self.lr}")

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


def evaluate_binary(
    params: Mapping[str, torch.Tensor], counts: TokenCounts, labels: object
) -> dict[str, float]:
    """Logistic loss and accuracy of the one-layer model on ``counts`` with -1/+1
    ``labels``."""
    with torch.no_grad():
        f = attention_output(params["E"], params["p"], params["v"], counts)
    y = check_outputs_and_labels(f, labels)
    return {
        "loss": float(logistic_loss(f, y, check_input=False)),
        "accuracy": float(((f * y) > 0).double().mean()),
    }


def token_scores(params: Mapping[str, torch.Tensor]) -> tuple[np.ndarray, np.ndarray]:
    """``(E.v, E.p)`` as float64 arrays."""
    with torch.no_grad():
        s = params["E"] @ torch.stack((params["v"], params["p"]), dim=1)
    s = s.to("cpu", torch.float64).numpy()
    return s[:, 0].copy(), s[:, 1].copy()


@dataclass
class Curve:
    """``metrics["<split>_<loss|accuracy>"]`` and ``scores[step] = (E.v, E.p)`` at the
    evaluation ``steps``; the final ``params``; ``step_losses[t]``, the training loss
    of step ``t + 1`` computed before its update."""

    steps: list[int] = field(default_factory=list)
    metrics: dict[str, list[float]] = field(default_factory=dict)
    scores: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    params: dict[str, torch.Tensor] = field(default_factory=dict)
    step_losses: list[float] = field(default_factory=list)

    def at(self, step: int) -> dict[str, float]:
        """The metrics recorded at ``step``."""
        j = self.steps.index(step)
        return {k: v[j] for k, v in self.metrics.items()}


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
    for ``max(eval_steps)`` steps of ``dynamics``, recording ``splits`` at
    ``eval_steps``. With ``fused`` a step sweeps over ``E`` once where it can
    (:func:`~attnbook.engine.fused.fused_one_layer_step`); else autograd."""
    if not trainable or set(trainable) - set(_GROUPS):
        raise ValueError(f"trainable must name groups among {_GROUPS}, got {trainable}")
    if missing := [g for g in trainable if g not in dynamics.lr]:
        raise ValueError(f"no step size for the trained groups {missing}")
    P = {
        k: t.detach().clone().requires_grad_(k in trainable) for k, t in params.items()
    }
    device, dtype = P["E"].device, P["E"].dtype

    def split(s: str) -> tuple:
        y = corpus.labels(s, dtype=dtype, device=device)
        return getattr(corpus, s).to(device), y

    data = {s: split(s) for s in splits}
    train = data.get("train") or split("train")
    kw = dict(optimizer=dynamics.optimizer, lr=dynamics.lr, trainable=trainable)
    # None where the one-sweep step does not apply
    step_once = fused_one_layer_step(P, *train, **kw) if fused else None
    if step_once is None:
        loss_fn = binary_loss_closure(P, *train)
        groups = [{"params": [P[g]], "lr": float(dynamics.lr[g])} for g in trainable]
        opt = torch_optimizer(dynamics.optimizer, groups)
    curve = Curve()
    for step in range(max(eval_steps) + 1):
        if step > 0 and step_once is not None:
            curve.step_losses.append(float(step_once(step)))
        elif step > 0:
            curve.step_losses.append(float(training_step(opt, loss_fn, step)))
        if step in eval_steps:
            curve.steps.append(step)
            for name, (counts, y) in data.items():
                for m, value in evaluate_binary(P, counts, y).items():
                    curve.metrics.setdefault(f"{name}_{m}", []).append(value)
            curve.scores[step] = token_scores(P)
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

    def spread(values: np.ndarray, reading: str) -> float:
        weighting = "bins" if reading == "bins" else "tokens"
        s = mean_within_bin_std(x[keep], values, n_bins, lo, hi, weighting)
        return s / float(values.std()) if reading == "scale-free" else s

    rows = []
    for step in sorted(set(numerator.scores) & set(denominator.scores) - {0}):
        for j, score in enumerate(("E.v", "E.p")):
            a = numerator.scores[step][j][keep]
            b = denominator.scores[step][j][keep]
            rows += [
                dict(
                    step=step, score=score, reading=r, ratio=spread(a, r) / spread(b, r)
                )
                for r in SPREAD_READINGS
            ]
    return pd.DataFrame(rows)


#: The ablations: key -> (name, starting point, trained groups).
ABLATIONS = {
    "full": ("trained E", "init", ("E", "p", "v")),
    "random_E": ("random fixed E", "random_E", ("p", "v")),
    "one_step_head": ("one step, then frozen E", "one_step", ("p", "v")),
}


def ablation_curves(
    corpus: ReviewCorpus,
    points: object,
    dynamics: Mapping[str, Dynamics],
    eval_steps: tuple[int, ...],
    *,
    models: tuple[str, ...] = tuple(ABLATIONS),
) -> dict[tuple[str, str], Curve]:
    """The curve of each of ``models`` under each ``dynamics[label]``, from
    ``points[start]``, keyed ``(model, label)``."""
    if unknown := set(models) - set(ABLATIONS):
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
