"""The starting points of the real-data chapters' models, drawn once.

:func:`starting_points` draws the initialization that every model of the chapter
starts from (:class:`StartingPoints`): the initial ``E, p, v``; the same with the random
``E`` at unit scale; and ``E`` after one gradient step. :class:`ReviewExperimentConfig`
holds the settings, :func:`one_step_eta` the size of the step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np
import torch

from attnbook.data.corpus import ReviewCorpus
from attnbook.models.parameters import init_parameters
from attnbook.theory.one_step import one_gradient_step

__all__ = [
    "ReviewExperimentConfig",
    "StartingPoints",
    "starting_points",
    "one_step_eta",
]


@dataclass(frozen=True)
class ReviewExperimentConfig:
    """The settings :func:`starting_points` draws the models' initialization with.

    ``dim`` is the embedding dimension; ``init_scale`` the scale of the initial
    embeddings (rows of norm about ``init_scale``; ``p`` and ``v`` start with norm about
    one); ``eta`` the size of the single gradient step; ``dtype`` float32 or float64.
    """

    dim: int = 2048
    init_scale: float = 0.01
    eta: float = 1000.0
    dtype: torch.dtype = torch.float32

    def __post_init__(self) -> None:
        if isinstance(self.dim, bool) or not isinstance(self.dim, int) or self.dim < 1:
            raise ValueError(f"dim must be a positive integer, got {self.dim!r}")
        for name, positive in (("init_scale", True), ("eta", False)):
            value = getattr(self, name)
            ok = isinstance(value, (int, float)) and np.isfinite(value)
            if not ok or value < 0 or (positive and value == 0):
                need = "positive" if positive else "non-negative"
                raise ValueError(
                    f"{name} must be a finite {need} number, got {value!r}"
                )
        if self.dtype not in (torch.float32, torch.float64):
            raise ValueError(
                f"dtype must be torch.float32 or torch.float64, got {self.dtype}"
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


def one_step_eta(alpha: np.ndarray, dim: int, sigma: float) -> float:
    """The step size whose predicted change of the median token is ten times the
    initialization noise: ``20 sigma / (sqrt(d) median |alpha_s|)``."""
    return float(20 * sigma / (np.sqrt(dim) * np.median(np.abs(alpha))))
