"""The real-data experiment of chapter 4: four models trained from one initialization.

:func:`run_review_experiment` draws one initialization and trains, under one protocol,
full training of ``E``, ``p`` and ``v``; ``p`` and ``v`` on the random ``E``; and ``p``
and ``v`` on ``E`` after one gradient step. :func:`starting_points` draws the
initialization that every model of the chapter starts from.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pandas as pd
import torch

from attnbook.data.corpus import ReviewCorpus
from attnbook.experiments.evaluation import evaluate_binary
from attnbook.models.parameters import init_parameters
from attnbook.models.training import (
    OPTIMIZERS,
    History,
    binary_loss_closure,
    fit,
    plateau_stop,
)
from attnbook.theory.one_step import one_gradient_step

__all__ = [
    "train_on_reviews",
    "token_scores",
    "history_frame",
    "ReviewExperimentConfig",
    "ReviewExperiment",
    "run_review_experiment",
    "StartingPoints",
    "starting_points",
]


def train_on_reviews(
    params: Mapping[str, torch.Tensor],
    corpus: ReviewCorpus,
    *,
    steps: int,
    lr: float,
    trainable: tuple[str, ...] = ("E", "p", "v"),
    optimizer: str = "adam",
    eval_every: int = 10,
    rel_tol: float | None = 0.01,
    window: int = 5,
) -> History:
    """Full-batch training of the binary model on the training split of ``corpus``.

    A thin wrapper of :func:`attnbook.models.training.fit` with
    :func:`attnbook.models.training.binary_loss_closure`:
    at step 0, every ``eval_every`` steps and at the end it records ``train_loss``,
    ``train_accuracy``, ``test_loss``, ``test_accuracy`` and ``test_balanced_accuracy``
    (:func:`evaluate_binary`). It stops after ``steps`` steps or earlier by
    :func:`plateau_stop` with ``rel_tol`` and ``window`` (``rel_tol=None``: never
    early). ``params`` (``E``, ``p``, ``v`` on one device) are updated in place; the
    test split is only evaluated, never used to choose anything.

    When the corpus has a validation split (:func:`split_validation`) it also records
    ``val_loss``, ``val_accuracy`` and ``val_balanced_accuracy``, and the history keeps
    the step and a copy of the parameters with the lowest validation loss
    (``best_step``, ``best_params`` of :class:`~attnbook.models.training.History`).
    """
    E = params["E"]
    y_train = corpus.labels("train", dtype=E.dtype, device=E.device)
    y_test = corpus.labels("test", dtype=E.dtype, device=E.device)
    train, test = corpus.train.to(E.device), corpus.test.to(E.device)
    has_val = corpus.validation is not None
    if has_val:
        val = corpus.validation.to(E.device)
        y_val = corpus.labels("validation", dtype=E.dtype, device=E.device)

    def evaluate() -> dict[str, float]:
        tr = evaluate_binary(params, train, y_train)
        out = {"train_loss": tr["loss"], "train_accuracy": tr["accuracy"]}
        if has_val:
            va = evaluate_binary(params, val, y_val)
            out.update(
                val_loss=va["loss"],
                val_accuracy=va["accuracy"],
                val_balanced_accuracy=va["balanced_accuracy"],
            )
        te = evaluate_binary(params, test, y_test)
        out.update(
            test_loss=te["loss"],
            test_accuracy=te["accuracy"],
            test_balanced_accuracy=te["balanced_accuracy"],
        )
        return out

    return fit(
        params,
        binary_loss_closure(params, train, y_train),
        steps=steps,
        lr=lr,
        optimizer=optimizer,
        trainable=trainable,
        evaluate=evaluate,
        eval_every=eval_every,
        stop=None if rel_tol is None else plateau_stop(rel_tol, window),
        keep_best="val_loss" if has_val else None,
    )


def token_scores(params: Mapping[str, torch.Tensor]) -> tuple[np.ndarray, np.ndarray]:
    """``(E_s . v, E_s . p)`` for every token, as float64 NumPy arrays."""
    with torch.no_grad():
        E = params["E"]
        scores = E @ torch.stack((params["v"], params["p"]), dim=1)
        out = scores.detach().to("cpu", torch.float64).numpy()
    return out[:, 0].copy(), out[:, 1].copy()


def history_frame(history: History) -> pd.DataFrame:
    """The evaluation records of a :class:`~attnbook.models.training.History` as a long
    DataFrame with columns ``step``, ``split`` (train / val / test), ``metric`` (loss /
    accuracy / ...) and ``value``."""
    rows = []
    for key, values in history.metrics.items():
        split, _, metric = key.partition("_")
        for step, value in zip(history.eval_steps, values):
            rows.append(
                {"step": step, "split": split, "metric": metric, "value": value}
            )
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------- the experiment
@dataclass(frozen=True)
class ReviewExperimentConfig:
    """Settings of :func:`run_review_experiment` (see the real-data chapter for the
    choices).

    ``init_scale`` is the scale of the initial embeddings (rows of norm about
    ``init_scale``); ``p`` and ``v`` start with norm about one. ``eta`` is the size of
    the single gradient step; ``lr_full`` / ``steps_full`` drive the joint training of
    ``E, p, v`` and ``lr_head`` / ``steps_head`` the training of ``p, v`` alone (the two
    ablations). Every trained model stops by :func:`plateau_stop` (``rel_tol``,
    ``window``) or at its step cap, except the models named in ``run_to_cap`` (among
    ``"full"``, ``"random_E"``, ``"one_step_head"``), which ignore the plateau rule and
    always run to the cap; a model whose loss crawls along a long, slightly sloped
    plateau is then not ended on it (its reported step is still the validation minimum).
    ``steps_one_step_head`` is the step cap of the one-step-then-frozen model (``None``:
    ``steps_head``, the cap of the random-``E`` model).
    """

    dim: int = 2048
    init_scale: float = 0.01
    eta: float = 1000.0
    lr_full: float = 1e-3
    steps_full: int = 200
    lr_head: float = 1e-2
    steps_head: int = 600
    eval_every: int = 10
    rel_tol: float = 0.01
    window: int = 5
    optimizer: str = "adam"
    dtype: torch.dtype = torch.float32
    run_to_cap: tuple[str, ...] = ()
    steps_one_step_head: int | None = None

    def __post_init__(self) -> None:
        for name in ("dim", "eval_every", "window"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name in ("steps_full", "steps_head"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(
                    f"{name} must be a non-negative integer, got {value!r}"
                )
        for name, positive in (
            ("init_scale", True),
            ("eta", False),
            ("lr_full", True),
            ("lr_head", True),
        ):
            value = getattr(self, name)
            ok = isinstance(value, (int, float)) and np.isfinite(value)
            if not ok or value < 0 or (positive and value == 0):
                need = "positive" if positive else "non-negative"
                raise ValueError(
                    f"{name} must be a finite {need} number, got {value!r}"
                )
        if not 0 < self.rel_tol < 1:
            raise ValueError(f"rel_tol must be in (0, 1), got {self.rel_tol}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(
                f"optimizer must be one of {sorted(OPTIMIZERS)}, got {self.optimizer!r}"
            )
        if self.dtype not in (torch.float32, torch.float64):
            raise ValueError(
                f"dtype must be torch.float32 or torch.float64, got {self.dtype}"
            )
        if self.steps_one_step_head is not None and self.steps_one_step_head < 0:
            raise ValueError(
                "steps_one_step_head must be non-negative, got "
                f"{self.steps_one_step_head}"
            )
        unknown = set(self.run_to_cap) - {"full", "random_E", "one_step_head"}
        if unknown:
            raise ValueError(
                f"run_to_cap names unknown models {sorted(unknown)}; "
                "choose among 'full', 'random_E', 'one_step_head'"
            )


@dataclass
class ReviewExperiment:
    """The four models of the real-data chapter, trained on one corpus from one
    initialization.

    ``params[k]`` are detached parameter dictionaries for ``k`` in ``"init"`` (``E^0,
    p^0, v^0``), ``"full"`` (``E, p, v`` trained jointly), ``"random_E"`` (``E^0 /
    init_scale``, rows of norm about one, kept fixed; ``p, v`` trained), ``"one_step"``
    (``E^1``, one gradient step of size ``eta`` on ``E`` from the initialization; ``p^0,
    v^0``) and ``"one_step_head"`` (``E^1`` kept fixed; ``p, v`` trained). ``histories``
    and ``seconds`` hold the training record and wall time of the three trained models.
    ``params`` are the parameters at the *end* of training; when the corpus has a
    validation split, ``best_params[k]`` and ``best_steps[k]`` are those of the
    evaluation step with the lowest validation loss of each trained model.
    """

    config: ReviewExperimentConfig
    params: dict[str, dict[str, torch.Tensor]]
    histories: dict[str, History]
    seconds: dict[str, float]
    best_params: dict[str, dict[str, torch.Tensor]] = dataclasses.field(
        default_factory=dict
    )
    best_steps: dict[str, int] = dataclasses.field(default_factory=dict)


def _detached(params: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: t.detach().clone() for k, t in params.items()}


@dataclass(frozen=True)
class StartingPoints:
    """The parameters every model of the chapter starts from, drawn once.

    ``init``: ``E^0`` (rows of norm about ``init_scale``), ``p^0``, ``v^0`` (norm about
    one); ``random_E``: the same with ``E^0 / init_scale`` (rows of norm about one);
    ``one_step``: ``E^1``, one exact gradient step of size ``eta`` on ``E`` from
    ``init``, with ``p^0``, ``v^0``.
    """

    init: dict[str, torch.Tensor]
    random_E: dict[str, torch.Tensor]
    one_step: dict[str, torch.Tensor]

    def __getitem__(self, key: str) -> dict[str, torch.Tensor]:
        if key not in ("init", "random_E", "one_step"):
            raise KeyError(key)
        return getattr(self, key)


def starting_points(
    corpus: ReviewCorpus,
    config: ReviewExperimentConfig,
    *,
    generator: torch.Generator,
    device: torch.device | str | None = None,
) -> StartingPoints:
    """Draw the initialization of :class:`StartingPoints` from ``generator``
    (:func:`attnbook.models.parameters.init_parameters` at unit scale, ``E`` then
    multiplied by ``config.init_scale``) and take the one step of size ``config.eta``
    (:func:`attnbook.theory.one_step.one_gradient_step` on ``corpus.train``)."""
    init = init_parameters(
        corpus.vocab_size,
        config.dim,
        scale=1.0,
        generator=generator,
        dtype=config.dtype,
        device=device,
    )
    init = _detached(init)
    unit_E = init["E"]
    init["E"] = unit_E * config.init_scale
    y_train = corpus.labels("train", dtype=config.dtype, device=unit_E.device)
    E1 = one_gradient_step(init, corpus.train.to(unit_E.device), y_train, config.eta)
    return StartingPoints(
        init=_detached(init),
        random_E=_detached({**init, "E": unit_E}),
        one_step=_detached({**init, "E": E1}),
    )


def run_review_experiment(
    corpus: ReviewCorpus,
    config: ReviewExperimentConfig,
    *,
    generator: torch.Generator,
    device: torch.device | str | None = None,
) -> ReviewExperiment:
    """Initialize once and train the four models of :class:`ReviewExperiment`.

    The initialization is :func:`attnbook.models.parameters.init_parameters` with unit
    scale for ``p`` and ``v``; ``E^0`` is the same draw multiplied by
    ``config.init_scale``. The single step is
    :func:`attnbook.theory.one_step.one_gradient_step` (exact full-batch gradient of the
    logistic loss on ``corpus.train``); all training goes through
    :func:`train_on_reviews`.
    """
    points = starting_points(corpus, config, generator=generator, device=device)
    init, E1 = points.init, points.one_step["E"]
    starts = {
        "full": (init, ("E", "p", "v"), config.lr_full, config.steps_full),
        "random_E": (
            points.random_E,
            ("p", "v"),
            config.lr_head,
            config.steps_head,
        ),
        "one_step_head": (
            points.one_step,
            ("p", "v"),
            config.lr_head,
            config.steps_head
            if config.steps_one_step_head is None
            else config.steps_one_step_head,
        ),
    }
    params = {"init": _detached(init), "one_step": _detached({**init, "E": E1})}
    histories: dict[str, History] = {}
    seconds: dict[str, float] = {}
    for key, (start, trainable, lr, steps) in starts.items():
        p = _detached(start)
        t0 = time.perf_counter()
        histories[key] = train_on_reviews(
            p,
            corpus,
            steps=steps,
            lr=lr,
            trainable=trainable,
            optimizer=config.optimizer,
            eval_every=config.eval_every,
            rel_tol=None if key in config.run_to_cap else config.rel_tol,
            window=config.window,
        )
        seconds[key] = time.perf_counter() - t0
        params[key] = _detached(p)
    best = {k: h for k, h in histories.items() if h.best_params is not None}
    return ReviewExperiment(
        config,
        params,
        histories,
        seconds,
        best_params={k: h.best_params for k, h in best.items()},
        best_steps={k: h.best_step for k, h in best.items()},
    )
