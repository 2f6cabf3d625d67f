import torch

from attnbook.models.training import fit


def test_fit_evaluates_at_the_start_every_eval_every_steps_and_at_the_end():
    # minimise (w - 1)^2 by gradient descent, evaluating (w - 0.5)^2 along the way
    w = torch.zeros(1, requires_grad=True)
    params = {"w": w}
    h = fit(
        params,
        lambda: ((params["w"] - 1.0) ** 2).sum(),
        steps=7,
        lr=0.05,
        optimizer="gd",
        evaluate=lambda: {"val": float((params["w"] - 0.5).pow(2).sum())},
        eval_every=3,
    )
    assert h.eval_steps == [0, 3, 6, 7] and len(h.metrics["val"]) == 4
    assert len(h.loss) == 7 and h.loss == sorted(h.loss, reverse=True)
    assert h.metrics["val"][0] == 0.25
