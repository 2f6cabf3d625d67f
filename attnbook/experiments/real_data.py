"""The starting points of the real-data chapters' models, drawn once.

:func:`starting_points` draws the initialization that every model of the chapter
starts from (:class:`StartingPoints`): the initial ``E, p, v``; the same with the random
``E`` at unit scale; and ``E`` after one gradient step. :class:`ReviewExperimentConfig`
holds the settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np
import torch

from attnbook.data.corpus import ReviewCorpus
from attnbook.models.parameters import init_parameters
from attnbook.models.training import OPTIMIZERS
from attnbook.theory.one_step import one_gradient_step

__all__ = [
    "ReviewExperimentConfig",
    "StartingPoints",
    "starting_points",
]


@dataclass(frozen=True)
class ReviewExperimentConfig:
    """Settings of the real-data chapters' models (see the real-data chapter for the
    choices).

    :func:`starting_points` reads ``dim``, ``init_scale``, ``eta`` and ``dtype``:
    ``init_scale`` is the scale of the initial embeddings (rows of norm about
    ``init_scale``); ``p`` and ``v`` start with norm about one. ``eta`` is the size of
    the single gradient step. The training settings (``lr_full``, ``steps_full``,
    ``lr_head``, ``steps_head``, ``eval_every``, ``rel_tol``, ``window``,
    ``optimizer``, ``run_to_cap``, ``steps_one_step_head``) are checked here but read
    by nothing in the package.
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
