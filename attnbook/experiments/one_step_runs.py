"""The one step at every dimension of a list: the correlation of ``E^1 . v`` with the
lemma's ``(eta/2) alpha ||v||^2``, measured and predicted by its noise model."""

from __future__ import annotations

import pandas as pd
import torch

from attnbook.engine.counts import TokenCounts
from attnbook.theory.one_step import (
    init_one_step,
    one_gradient_step,
    pearson,
    predicted_pearson,
)

__all__ = ["dimension_table"]


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
    """One float32 step at every dimension of ``dims`` (the initialization seeded with
    the dimension): the measured Pearson r of ``E^1 . v`` with ``(eta/2) alpha
    ||v||^2`` beside the noise-only prediction; one row per ``d``."""
    rows = []
    for d in dims:
        gen = torch.Generator().manual_seed(d)
        init = dict(generator=gen, dtype=torch.float32, device=device)
        params = init_one_step(counts.vocab_size, d, init_scale=init_scale, **init)
        v = params["v"]
        value1 = (one_gradient_step(params, counts, labels, eta) @ v).double().cpu()
        pred = 0.5 * float(eta) * alpha.to(v.dtype).to(v.device) * (v @ v)
        pred = pred.double().cpu().numpy()
        rows.append(
            {
                "d": d,
                "d / V": d / counts.vocab_size,
                "r measured": pearson(value1.numpy(), pred),
                "r predicted (noise only)": predicted_pearson(
                    pred, init_scale, float(v @ v), d
                ),
            }
        )
    return pd.DataFrame(rows).set_index("d")
