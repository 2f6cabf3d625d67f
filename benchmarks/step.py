"""The training step measured against its memory bound: the fused one-sweep step of
:mod:`attnbook.engine.fused`, the current step (the engine's gradient, then
torch's fused Adam) and ``torch.optim.Adam`` in its default form over that gradient."""

from __future__ import annotations

from typing import Callable

import torch

from attnbook.engine.counts import TokenCounts
from attnbook.engine.fused import FusedOneLayerStep
from attnbook.models.attention import attention_output
from attnbook.models.losses import logistic_loss
from attnbook.models.parameters import init_parameters
from attnbook.models.training import OPTIMIZERS, training_step
from benchmarks.timing import time_min

__all__ = ["minimum_step_bytes", "step_table", "step_lines"]


def minimum_step_bytes(
    counts: TokenCounts, dim: int, dtype: torch.dtype = torch.float32
) -> int:
    """Bytes an Adam step of the one-layer model must move at the very least: ``E``
    and its two moments read once and written once (``6 V d`` floats) and the counts
    read once in the compact form the engine uses (32-bit row pointers and token ids,
    one float per count). The step reads the counts twice (forward and backward) and,
    when ``p`` and ``v`` are trained, ``E`` once more (the next scores), so the bound is
    a floor it cannot reach."""
    item = torch.finfo(dtype).bits // 8
    counts_bytes = 4 * (counts.n_sequences + 1) + (4 + item) * counts.nnz
    return counts_bytes + 6 * counts.vocab_size * dim * item


def _steps(
    counts: TokenCounts, labels: torch.Tensor, dim: int, dtype: torch.dtype, lr: float
) -> dict[str, Callable[[], object]]:
    """One step function per way of stepping, each on its own copy of the parameters
    drawn by :func:`init_parameters` with seed 0."""
    y = labels.to(dtype=dtype, device=counts.device)
    out = {}
    for name in ("fused", "current", "torch Adam"):
        params = init_parameters(
            counts.vocab_size,
            dim,
            generator=torch.Generator().manual_seed(0),
            dtype=dtype,
            device=counts.device,
        )
        if name == "fused":
            step = FusedOneLayerStep(params, counts, y, optimizer="adam", lr=lr)
            out[name] = lambda s=step: s(1)
            continue
        ps = [params[k] for k in ("E", "p", "v")]
        opt = (
            OPTIMIZERS["adam"](ps, lr)
            if name == "current"
            else torch.optim.Adam(ps, lr=lr)
        )

        def loss(P=params) -> torch.Tensor:
            return logistic_loss(attention_output(P["E"], P["p"], P["v"], counts), y)

        out[name] = lambda o=opt, f=loss: training_step(o, f, 1)
    return out


def step_table(
    counts: TokenCounts,
    labels: torch.Tensor,
    *,
    dim: int,
    bandwidth: float,
    repeats: int = 7,
    dtype: torch.dtype = torch.float32,
    lr: float = 1e-3,
) -> dict[str, object]:
    """Full-batch Adam steps of the one-layer model on ``counts`` timed in one
    run: the minimum over ``repeats`` steps of each way, interleaved (one step of each
    in turn, so that other load on the machine touches all three alike). Returns
    ``rows`` (``step``, ``ms``, ``GB/s`` at the minimum bytes, ``bound fraction`` =
    bound time / step time with ``bandwidth`` in bytes per second, ``x current``),
    ``bytes``, ``t_bound`` and the two headline numbers ``bound_fraction`` (fused) and
    ``speedup`` (current / fused)."""
    steps = _steps(counts, labels, dim, dtype, lr)
    nbytes = minimum_step_bytes(counts, dim, dtype)
    best = {name: float("inf") for name in steps}
    for fn in steps.values():  # warm up: first-use allocations and compilation
        fn()
    for _ in range(repeats):
        for name, fn in steps.items():
            best[name] = min(best[name], time_min(fn, 1, counts.device, warmup=0))
    t_bound = nbytes / bandwidth
    rows = [
        {
            "step": name,
            "ms": 1e3 * t,
            "GB/s": nbytes / t / 1e9,
            "bound fraction": t_bound / t,
            "x current": best["current"] / t,
        }
        for name, t in best.items()
    ]
    return {
        "rows": rows,
        "bytes": nbytes,
        "t_bound": t_bound,
        "bound_fraction": t_bound / best["fused"],
        "speedup": best["current"] / best["fused"],
    }


def step_lines(table: dict[str, object], bandwidth: float) -> list[str]:
    """The step table as printed lines, ending with the line for scripts."""
    lines = [
        "training step (Adam, full batch): minimum bytes "
        f"{table['bytes'] / 1e6:.1f} MB (E and its two moments read and written "
        "once, counts read once) at "
        f"{bandwidth / 1e9:.1f} GB/s -> bound {1e3 * table['t_bound']:.2f} ms",
        f"{'step':<12} {'ms':>8} {'GB/s':>7} {'of bound':>9} {'x current':>10}",
    ]
    lines += [
        f"{r['step']:<12} {r['ms']:>8.2f} {r['GB/s']:>7.1f} "
        f"{r['bound fraction']:>9.3f} {r['x current']:>10.2f}"
        for r in table["rows"]
    ]
    lines.append(
        f"step_bound_fraction={table['bound_fraction']:.3f} "
        f"step_speedup={table['speedup']:.2f}"
    )
    return lines
