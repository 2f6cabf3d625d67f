"""The data and the one gradient step of the K-class chapter: reviews with their star
classes (:func:`class_reviews`) and the one-step alignment of every token with every
class vector beside its prediction (:func:`class_one_step`)."""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from attnbook.data.corpus import ReviewCorpus, prepare_reviews
from attnbook.experiments.extensions import class_importance
from attnbook.theory.one_step import (
    class_signed_frequency,
    one_gradient_step_multiclass,
    predicted_class_alignment,
)
from attnbook.theory.one_step_check import init_one_step

__all__ = ["class_reviews", "class_one_step"]


def class_reviews(
    name: str,
    min_df: int,
    to_classes: Callable[[np.ndarray], np.ndarray],
    n_classes: int,
) -> dict[str, object]:
    """The reviews ``name`` (vocabulary of the tokens in at least ``min_df`` training
    reviews) with the classes ``to_classes`` gives their stars: ``corpus``,
    ``y_train``, ``y_test`` (tensors) and the per-class ``importance`` on the training
    split."""
    corpus = prepare_reviews(name, min_df)
    y_train = torch.from_numpy(to_classes(corpus.train_stars))
    return {
        "corpus": corpus,
        "y_train": y_train,
        "y_test": torch.from_numpy(to_classes(corpus.test_stars)),
        "importance": class_importance(corpus.train, y_train.numpy(), n_classes),
    }


def class_one_step(
    corpus: ReviewCorpus,
    y_train: torch.Tensor,
    n_classes: int,
    dim: int,
    *,
    seed: int,
    eta: float = 1.0,
    device: torch.device | str = "cpu",
) -> tuple[np.ndarray, np.ndarray, torch.Tensor]:
    """One gradient step of size ``eta`` on ``E`` of the K-class model from a small
    initialization (scale 1e-4, drawn with ``seed``): the measured ``E^1_s . v_k``, the
    prediction ``eta gamma_sk |v_k|^2`` without the cross terms, and the per-class
    signed frequencies ``gamma``."""
    params = init_one_step(
        corpus.vocab_size,
        dim,
        init_scale=1e-4,
        n_classes=n_classes,
        generator=torch.Generator().manual_seed(seed),
        dtype=torch.float32,
        device=device,
    )
    E1 = one_gradient_step_multiclass(
        params, corpus.train.to(device), y_train.to(device), eta
    )
    gamma = class_signed_frequency(corpus.train, y_train, n_classes, corpus.vocab_size)
    W0 = params["W"]
    measured = (E1 @ W0).cpu().double().numpy()
    diagonal = predicted_class_alignment(gamma, W0.double(), eta, cross_terms=False)
    return measured, diagonal.cpu().numpy(), gamma
