"""The model computed in different ways, for the setup chapter's comparisons: the dense
and the count implementations through one loss, the unshifted softmax that overflows,
and the hard-max limit of the softmax."""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import torch

from attnbook.models.losses import logistic_loss


def outputs_and_gradients(
    model: Callable,
    E: torch.Tensor,
    p: torch.Tensor,
    v: torch.Tensor,
    sequences: Sequence,
    labels: torch.Tensor,
) -> list[torch.Tensor]:
    """``[f, dL/dE, dL/dp, dL/dv]``: the outputs of ``model(E, p, v, sequences)`` and
    the gradients of the logistic loss at ``labels``, on copies of the parameters."""
    params = [t.clone().requires_grad_(True) for t in (E, p, v)]
    f = model(*params, sequences)
    logistic_loss(f, labels).backward()
    return [f.detach()] + [t.grad for t in params]


def unshifted_output(
    E: torch.Tensor, p: torch.Tensor, v: torch.Tensor, sequences: Sequence
) -> torch.Tensor:
    """The model output with the softmax written as it stands, ``sum exp(a) b / sum
    exp(a)`` without a shift: ``nan`` once a score exceeds float's range."""
    return torch.stack(
        [
            (torch.exp(E[s] @ p) * (E[s] @ v)).sum() / torch.exp(E[s] @ p).sum()
            for s in sequences
        ]
    )


def hard_max_output(
    E: torch.Tensor, p: torch.Tensor, v: torch.Tensor, sequences: Sequence
) -> torch.Tensor:
    """The limit of the output as attention concentrates: the value ``E_s . v`` of the
    position of largest score ``E_s . p`` in each sequence (the first on a tie)."""
    return torch.stack([E[s[np.argmax((E[s] @ p).numpy())]] @ v for s in sequences])
