import pytest
import torch

from attnbook.models.training import fit


def test_fit_keep_best_tracks_lowest_metric_and_copies():
    # minimise (w - 1)^2 with a "validation" metric (w - 0.5)^2: best where w passes 0.5
    w = torch.zeros(1, requires_grad=True)
    params = {"w": w}
    h = fit(
        params,
        lambda: ((params["w"] - 1.0) ** 2).sum(),
        steps=40,
        lr=0.05,
        optimizer="gd",
        evaluate=lambda: {"val": float((params["w"] - 0.5).pow(2).sum())},
        eval_every=1,
        keep_best="val",
    )
    vals = h.metrics["val"]
    best_index = min(range(len(vals)), key=vals.__getitem__)
    assert h.best_step == h.eval_steps[best_index] and h.best_value == vals[best_index]
    assert 0 < h.best_step < 40
    assert abs(float(h.best_params["w"].detach()) - 0.5) < abs(
        float(params["w"].detach()) - 0.5
    )
    assert not h.best_params["w"].requires_grad  # a detached copy, not the live tensor
    assert h.best_params["w"] is not params["w"]


def test_fit_keep_best_errors_and_default():
    p = {"w": torch.zeros(1, requires_grad=True)}
    loss = lambda: (p["w"] - 1).pow(2).sum()  # noqa: E731
    with pytest.raises(ValueError, match="evaluate"):
        fit(p, loss, steps=2, lr=0.1, keep_best="val")
    with pytest.raises(ValueError, match="not among"):
        fit(p, loss, steps=2, lr=0.1, evaluate=lambda: {"other": 0.0}, keep_best="val")
    h = fit(p, loss, steps=2, lr=0.1, evaluate=lambda: {"val": 0.0})
    assert h.best_step is None and h.best_params is None
