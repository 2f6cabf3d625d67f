"""A synthetic trend of the extension controls, for the controls and spreads tests."""

import numpy as np
import pytest

from attnbook.book.controls import controlled_trend


@pytest.fixture
def make_trend():
    """``make_trend(seed, n, signal, noise)``: three real-label runs ``signal * held +
    noise * N(0, 1)`` over ``n`` tokens, five shuffled-label runs and one initial run of
    pure noise, a monotone trend in the held-out statistic."""

    def make(seed: int = 3, n: int = 400, signal: float = 1.0, noise: float = 0.2):
        rng = np.random.default_rng(seed)
        held = rng.uniform(-1, 1, n)
        return controlled_trend(
            [signal * held + noise * rng.normal(size=n) for _ in range(3)],
            [rng.normal(size=n) for _ in range(5)],
            [rng.normal(size=n)],
            heldout=held,
            train=held,
            log_df=rng.normal(size=n),
            shape="monotone",
        )

    return make
