"""The starting points of the real-data chapters' models, drawn once
(:func:`starting_points`), the trained model's scores (:func:`adam_scores`), and the
size of the one step (:func:`one_step_eta`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from attnbook.data.corpus import ReviewCorpus
from attnbook.experiments.curves import Dynamics, train_curve
from attnbook.models.parameters import init_parameters
from attnbook.theory.one_step import one_gradient_step


@dataclass(frozen=True)
class StartingPoints:
    """``init`` (rows of ``E`` of norm about ``sigma``, ``p`` and ``v`` about one),
    ``random_E`` (``E / sigma``) and ``one_step`` (``E`` after one gradient step)."""

    init: dict[str, torch.Tensor]
    random_E: dict[str, torch.Tensor]
    one_step: dict[str, torch.Tensor]

    def __getitem__(self, key: str) -> dict[str, torch.Tensor]:
        return getattr(self, key)


def starting_points(
    corpus: ReviewCorpus,
    *,
    dim: int,
    sigma: float,
    eta: float,
    generator: torch.Generator,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> StartingPoints:
    """The :class:`StartingPoints` in dimension ``dim``, drawn at unit scale from
    ``generator``, ``E`` times ``sigma``; one gradient step of size ``eta``."""
    if not (np.isfinite(sigma) and sigma > 0):
        raise ValueError(f"sigma must be positive and finite, got {sigma}")
    init = init_parameters(
        corpus.vocab_size, dim, generator=generator, dtype=dtype, device=device
    )
    init = {k: t.detach().clone() for k, t in init.items()}
    unit_E = init["E"]
    init["E"] = unit_E * sigma
    y_train = corpus.labels("train", dtype=dtype, device=unit_E.device)
    E1 = one_gradient_step(init, corpus.train.to(unit_E.device), y_train, eta)
    return StartingPoints(init, {**init, "E": unit_E}, {**init, "E": E1})


def adam_scores(
    corpus: ReviewCorpus,
    seed: int,
    *,
    dim: int,
    sigma: float,
    lr: float,
    steps: int,
    device: torch.device | str | None = None,
) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """``steps`` full-batch Adam steps of size ``lr`` on ``E``, ``p``, ``v`` from the
    start of training seed ``seed`` (``p``, ``v`` of norm about one, rows of ``E`` of
    norm about ``sigma``): the token scores ``(E.v, E.p)`` at steps 0 and ``steps``."""
    gen = torch.Generator().manual_seed(seed)
    start = init_parameters(corpus.vocab_size, dim, generator=gen, device=device)
    start["E"] = start["E"] * sigma
    adam, trained = Dynamics.adam(lr), ("E", "p", "v")
    return train_curve(
        start, corpus, trainable=trained, dynamics=adam, eval_steps=(0, steps)
    ).scores


def one_step_eta(alpha: np.ndarray, dim: int, sigma: float) -> float:
    """The step size whose predicted change of the median token is ten times the
    initialization noise: ``20 sigma / (sqrt(d) median |alpha_s|)``."""
    return float(20 * sigma / (np.sqrt(dim) * np.median(np.abs(alpha))))
