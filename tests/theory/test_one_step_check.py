"""The standard error of a log-log slope."""

import numpy as np
import pytest

from attnbook.theory.one_step_check import loglog_slope, loglog_slope_se


def test_loglog_slope_se():
    x = np.repeat([1.0, 10.0, 100.0], 4)
    y = x**0.5
    assert loglog_slope_se(x, y) < 1e-12
    noise = np.exp(np.random.default_rng(0).normal(scale=0.1, size=x.size))
    se = loglog_slope_se(x, y * noise)
    # within a factor 3 of the textbook value sigma / sqrt(Sxx), sigma = 0.1
    assert 0.3 * 0.1 / np.sqrt(((np.log(x) - np.log(x).mean()) ** 2).sum()) < se
    assert se < 3 * 0.1 / np.sqrt(((np.log(x) - np.log(x).mean()) ** 2).sum())
    assert abs(loglog_slope(x, y * noise) - 0.5) < 5 * se
    with pytest.raises(ValueError):
        loglog_slope_se([1.0, 2.0], [1.0, 2.0])
