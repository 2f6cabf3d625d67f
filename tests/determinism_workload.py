"""The workload of tests/test_determinism.py: the computations of the chapters that the
test command executes only once, at a small scale. Run as a script, it prints the
SHA-256 of every number they give."""

import dataclasses
import hashlib

import numpy as np
import torch

from attnbook.data.selection import assumption_one_data
from attnbook.experiments.curves import (
    Dynamics,
    ablation_curves,
    log_steps,
    token_scores,
    train_curve,
)
from attnbook.experiments.importance import token_importance
from attnbook.experiments.real_data import starting_points
from attnbook.experiments.synthetic_picture import one_relevant_spec, synthetic_corpus
from attnbook.models.losses import logistic_loss
from attnbook.models.mlp_head import PooledIndex, init_mlp_head, mlp_attention_output
from attnbook.models.training import fit
from attnbook.models.two_layer import init_two_layer, two_layer_output
from attnbook.runtime import seed_everything
from attnbook.theory.flow import batched_gradient_flow, one_step_setting
from attnbook.theory.max_margin import max_margin_solution
from attnbook.theory.selection_map import collapse_threshold, value_map

digest = hashlib.sha256()


def add(*values):
    for x in values:
        if isinstance(x, torch.Tensor):
            x = x.detach().cpu().numpy()
        digest.update(np.ascontiguousarray(np.asarray(x, dtype=np.float64)).tobytes())


def main() -> str:
    """Run every computation and return the digest of all their numbers."""
    rng = seed_everything(3)
    corpus, _ = synthetic_corpus(one_relevant_spec(10, 60, 20), 300, 100, rng)
    config = dict(dim=32, sigma=0.01, eta=2.0)
    gd = Dynamics("gd", {"E": 0.2, "p": 0.3, "v": 0.3})
    permuted = np.random.default_rng(5).permutation(corpus.train_labels)
    null = dataclasses.replace(corpus, train_labels=permuted)
    for seed in (0, 1):  # chapter 4's runs: Adam, a null, gradient descent, one step
        gen = torch.Generator().manual_seed(seed)
        points = starting_points(corpus, **config, generator=gen)
        runs = [(points.init, corpus, ("E", "p", "v"), Dynamics.adam(1e-3), True)]
        runs += [(points.init, null, ("E", "p", "v"), Dynamics.adam(1e-3), True)]
        runs += [(points.init, corpus, ("E", "p", "v"), gd, f) for f in (True, False)]
        runs += [(points.one_step, corpus, ("p",), Dynamics.adam(1e-2), True)]
        for start, data, trainable, dynamics, fused in runs:
            curve = train_curve(
                start,
                data,
                trainable=trainable,
                dynamics=dynamics,
                eval_steps=(0, 15),
                fused=fused,
            )
            add(*curve.scores[15])
        add(*token_scores(points.one_step))
    add(token_importance(null.train, permuted))

    adam = {"adam": Dynamics.adam(1e-2)}
    curves = ablation_curves(corpus, points, adam, log_steps(20, 3))
    for key in sorted(curves):
        add(*(curves[key].metrics[m] for m in sorted(curves[key].metrics)))

    instances = [
        assumption_one_data(
            12, n_positive=3, n_negative=3, n_irrelevant=20, length=6, rng=rng
        )
        for _ in range(2)
    ]
    problems, selected, directions = [], [], []
    for seed, inst in enumerate(instances):
        E1, v, p0 = one_step_setting(inst, 32, 1.0, seed=seed)
        sol = max_margin_solution(E1, inst.counts, inst.important)
        add(sol.p, E1, v)
        problems.append((E1, v, inst.counts, inst.labels, p0))
        selected.append(inst.important)
        directions.append(torch.as_tensor(sol.p))
    for path in batched_gradient_flow(
        problems, log_t_max=8.0, selected=selected, directions=directions
    ):
        add(path.p[-1], path.selected_mass[-1])
    regime = value_map(
        instances,
        [dict(values=[0.5, 4.0], ratios=[1.0, 8.0], dims=[16], cls_scales=[0.01])],
        log_t_max=8.0,
        dtau=0.1,
        log_t_more=5.0,
        seed_offset=7,
    )
    add(regime.select_dtypes("number").to_numpy(), collapse_threshold(8))

    y = torch.as_tensor(corpus.train_labels, dtype=torch.float32)
    for init, output, data in (
        (init_two_layer, two_layer_output, corpus.train),
        (init_mlp_head, mlp_attention_output, PooledIndex.build(corpus.train)),
    ):
        params = init(corpus.vocab_size, 16, generator=torch.Generator().manual_seed(1))

        def loss(params=params, output=output, data=data):
            return logistic_loss(output(params, data), y)

        fit(params, loss, steps=5, lr=1e-2)
        add(*(params[k] for k in sorted(params)))
    return digest.hexdigest()


if __name__ == "__main__":
    print(main())
