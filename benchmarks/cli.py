"""``python -m benchmarks``: the command line of the benchmark."""

from __future__ import annotations

import argparse
import json
import traceback
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from attnbook.data.reviews import DatasetUnavailableError
from attnbook.engine import kernels
from attnbook.runtime import cpu_name, default_device
from benchmarks.measure import (
    backend_times,
    compare_implementations,
    engine_passes,
    fit_linear_time,
    init_benchmark_parameters,
    scaling_table,
    two_layer_comparison,
)
from benchmarks.step import step_lines, step_table
from benchmarks.timing import copy_bandwidth, minimum_bytes
from benchmarks.usual import prepare

__all__ = ["main", "write_json"]


# ------------------------------------------------------------------------- command line
def _passes_table(rows: Sequence[dict[str, float | str]]) -> str:
    lines = [f"{'pass':<24} {'MB':>7} {'ms':>7} {'GB/s':>7}"]
    lines += [
        f"{r['pass']:<24} {r['MB']:>7.1f} {r['ms']:>7.3f} {r['GB/s']:>7.1f}"
        for r in rows
    ]
    return "\n".join(lines)


def _table(rows: Sequence[dict[str, float]]) -> str:
    head = (
        f"{'varied':>10} {'docs':>7} {'V':>6} {'d':>6} {'nnz':>10} {'V*d':>11} "
        f"{'ms':>9} {'ns/count':>9}"
    )
    lines = [head]
    for r in rows:
        lines.append(
            f"{r['varied']:>10} {r['documents']:>7d} {r['vocab']:>6d} {r['dim']:>6d} "
            f"{r['nnz']:>10d} {r['vd']:>11d} {r['ms']:>9.2f} "
            f"{1e6 * r['ms'] / r['nnz']:>9.2f}"
        )
    return "\n".join(lines)


_POSITIVE = (
    "min_df",
    "dim",
    "docs",
    "repeats",
    "usual_repeats",
    "max_positions",
    "two_layer_docs",
    "two_layer_dim",
)


def _check_arguments(
    ap: argparse.ArgumentParser, args: argparse.Namespace
) -> torch.device:
    """Refuse values the benchmark cannot run with (``ap.error``: a usage message and
    exit status 2, no traceback); return the device."""
    for name in _POSITIVE:
        value = getattr(args, name)
        if value is not None and value < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1, got {value}")
    if args.device is None:
        return default_device()
    try:
        device = torch.device(args.device)
    except (RuntimeError, TypeError):
        ap.error(f"--device {args.device!r} is not a torch device (cpu, cuda, ...)")
    if device.type not in ("cpu", "cuda"):
        ap.error(f"--device must be cpu or cuda, got {args.device!r}")
    if device.type == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda was asked for, but torch sees no CUDA device")
    return device


def write_json(results: dict[str, object], path: str) -> None:
    """Write the numbers :func:`main` returns to ``path`` as JSON (tensors and NumPy
    numbers as plain numbers)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(results, indent=1, default=float) + "\n")


def main(argv: Sequence[str] | None = None) -> dict[str, object]:
    """Run the benchmark (see the module docstring); returns the measured numbers."""
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Benchmark of the count engine against the usual padded "
        "implementation.",
    )
    ap.add_argument("--dataset", default="imdb", choices=("imdb", "yelp"))
    ap.add_argument("--min-df", type=int, default=40)
    ap.add_argument("--dim", type=int, default=2048)
    ap.add_argument(
        "--docs", type=int, default=None, help="use only the first DOCS documents"
    )
    ap.add_argument(
        "--repeats", type=int, default=7, help="repetitions (minimum is reported)"
    )
    ap.add_argument(
        "--usual-repeats",
        type=int,
        default=2,
        help="passes of the usual implementation (the first also checks agreement)",
    )
    ap.add_argument(
        "--max-positions",
        type=int,
        default=16_384,
        help="padded positions per mini-batch of the usual implementation",
    )
    ap.add_argument("--two-layer-docs", type=int, default=200)
    ap.add_argument("--two-layer-dim", type=int, default=256)
    ap.add_argument("--no-scaling", action="store_true")
    ap.add_argument(
        "--only-step",
        action="store_true",
        help="measure only the training step against its bound (CPU)",
    )
    ap.add_argument(
        "--device", default=None, help="cpu or cuda (default: cuda when present)"
    )
    ap.add_argument(
        "--json", default=None, help="also write the measured numbers to this file"
    )
    args = ap.parse_args(argv)
    device = _check_arguments(ap, args)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else cpu_name()
    print(
        f"device: {device} ({name}), torch {torch.__version__}, "
        f"{torch.get_num_threads()} CPU thread(s), engine kernels: "
        f"{kernels.backend(device)}"
    )

    try:
        prep = prepare(args.dataset, args.min_df)
    except DatasetUnavailableError as err:
        ap.exit(1, f"{ap.prog}: error: {err}\n")
    counts, y = prep.counts, prep.labels
    print(
        f"data: {args.dataset} train, min_df={prep.min_df}: load "
        f"{prep.seconds_load:.2f} s, "
        f"vocabulary {prep.seconds_vocabulary:.2f} s, encode "
        f"{prep.seconds_encode:.2f} s"
    )
    if args.docs is not None:
        k = min(args.docs, counts.n_sequences)
        counts, y = counts.select(np.arange(k)), y[:k]
    counts = counts.to(device)
    y = y.to(device)
    V, d, n = counts.vocab_size, args.dim, counts.n_sequences
    T = int(counts.counts.sum())
    print(
        f"corpus: n={n} documents, V={V}, tokens={T}, stored counts nnz={counts.nnz}, "
        f"d={d}"
    )

    if args.only_step:
        if device.type != "cpu":
            ap.error("--only-step measures the CPU's fused step: use --device cpu")
        bw = copy_bandwidth(device, repeats=30)
        table = step_table(counts, y, dim=d, bandwidth=bw, repeats=args.repeats)
        print("\n".join(step_lines(table, bw)))
        out = {"step": table, "bandwidth": bw, "device": str(device)}
        if args.json:
            write_json(out, args.json)
        return out

    cmp = compare_implementations(
        counts,
        y,
        dim=d,
        max_positions=args.max_positions,
        usual_repeats=args.usual_repeats,
        repeats=args.repeats,
        progress=True,
    )
    print(
        f"usual implementation: {cmp['batches']} mini-batches, {cmp['positions']} "
        "padded "
        f"positions ({cmp['positions'] / T:.3f} x tokens)"
    )
    print(
        f"agreement: loss {cmp['loss_engine']:.7f} vs {cmp['loss_usual']:.7f} "
        "(relative "
        f"{cmp['loss_rel']:.1e}); gradients relative difference E "
        f"{cmp['grad_rel'][0]:.1e}, "
        f"p {cmp['grad_rel'][1]:.1e}, v {cmp['grad_rel'][2]:.1e}"
    )
    if not (cmp["loss_rel"] <= 1e-5 and max(cmp["grad_rel"]) <= 1e-4):
        raise SystemExit("the engine and the usual implementation disagree")
    t_usual, t_grad, t_step = cmp["usual_s"], cmp["engine_s"], cmp["step_s"]
    speedup = t_usual / t_grad
    print(
        f"full-batch forward+backward: usual {t_usual:.3f} s, engine "
        f"{1e3 * t_grad:.2f} ms "
        f"-> speed-up {speedup:.0f}x"
    )
    print(f"engine training step (forward+backward+Adam): {1e3 * t_step:.2f} ms")

    # (3) bandwidth bound
    bw = copy_bandwidth(device, repeats=30)
    nbytes = minimum_bytes(counts, d)
    t_bound = nbytes / bw
    fraction = t_bound / t_grad
    print(
        f"bandwidth (copy): {bw / 1e9:.1f} GB/s; minimum bytes per gradient "
        f"{nbytes / 1e6:.1f} MB -> bound {1e3 * t_bound:.2f} ms; engine reaches "
        f"{fraction:.3f} of the bound ({t_grad / t_bound:.1f}x the bound)"
    )

    steps = None
    if device.type == "cpu":  # the fused step is the CPU's
        steps = step_table(counts, y, dim=d, bandwidth=bw, repeats=args.repeats)
        print("\n".join(step_lines(steps, bw)))

    gpu = None
    if device.type == "cuda":
        from benchmarks.gpu import gpu_engine_times  # the GPU form, only on CUDA

        try:
            gpu = gpu_engine_times(counts, y, dim=d, repeats=args.repeats)
        except Exception:  # report it and measure the rest
            traceback.print_exc()
            print("GPU engine: FAILED (traceback above); the rest is measured")
    if gpu is not None:
        print(
            f"GPU engine ({gpu['backend']} count passes, no host synchronisation): "
            f"loss relative {gpu['loss_rel']:.1e}, gradients E "
            f"{gpu['grad_rel'][0]:.1e}, p {gpu['grad_rel'][1]:.1e}, v "
            f"{gpu['grad_rel'][2]:.1e} from the CPU engine (fastest way: dense "
            f"passes by {gpu['dense']})"
        )
        if not all(r["agrees"] for r in gpu["variants"].values()):  # see the end
            print("GPU engine: DISAGREES with the CPU engine beyond the tolerances")
        for kind, r in gpu["variants"].items():
            print(
                f"GPU gradient, dense passes by {kind}: eager "
                f"{1e3 * r['eager_s']:.3f} ms, CUDA graph {1e3 * r['graph_s']:.3f} ms "
                f"({t_bound / r['graph_s']:.3f} of the bound); training step (graph "
                f"+ fused Adam) {1e3 * r['graph_step_s']:.3f} ms; loss relative "
                f"{r['loss_rel']:.1e}, gradients {max(r['grad_rel']):.1e}"
            )
        # the engine on a GPU is the graphed gradient: the line below reports it
        t_best = min(t_grad, gpu["graph_s"])
        speedup, fraction = t_usual / t_best, t_bound / t_best

    # where the time goes, and what the compiled kernels buy
    params = init_benchmark_parameters(V, d, 0, torch.float32, device)
    passes = engine_passes(params, counts, repeats=args.repeats)
    print("the engine's passes, each timed from memory:")
    print(_passes_table(passes))
    t_passes = sum(r["ms"] for r in passes) / 1e3
    print(
        f"passes on their own {1e3 * t_passes:.2f} ms in all; the gradient (passes, "
        "vector "
        f"operations and autograd) {1e3 * t_grad:.2f} ms"
    )
    backends = backend_times(params, counts, y, repeats=args.repeats)
    del params
    if "compiled" in backends:
        print(
            f"gradient with the compiled kernels {1e3 * backends['compiled']:.2f} ms, "
            "with "
            f"their torch twins {1e3 * backends['torch']:.2f} ms -> "
            f"{backends['torch'] / backends['compiled']:.1f}x"
        )

    # (4) two-layer model
    two = two_layer_comparison(
        counts,
        y,
        n_docs=args.two_layer_docs,
        dim=args.two_layer_dim,
        repeats=max(2, args.repeats // 3),
    )
    if two is None:
        print("two-layer model: attnbook.models.two_layer not available")
    else:
        print(
            f"two-layer model ({two['documents']} documents, d={two['dim']}): loss "
            "relative "
            f"{two['loss_rel']:.1e}, gradients {two['grad_rel']:.1e}; forward+backward "
            f"engine {1e3 * two['engine_s']:.1f} ms, padded reference "
            f"{1e3 * two['reference_s']:.1f} ms -> speed-up {two['speedup']:.1f}x"
        )

    # (5) scaling
    rows: list[dict[str, float]] = []
    if not args.no_scaling:
        rows = scaling_table(counts, y, base_dim=d, repeats=args.repeats, progress=True)
        print(_table(rows))
        c0, c1, c2, worst = fit_linear_time(rows)
        print(
            f"fit: ms = {c0:.2f} + {1e6 * c1:.2f} ns x nnz + {1e6 * c2:.3f} ns x V*d "
            f"(largest relative deviation {worst:.2f})"
        )
    print("times are minima over repetitions; other load on the machine only adds time")
    print(f"speedup={speedup:.1f} bound_fraction={fraction:.3f}")
    out = dict(
        speedup=speedup,
        bound_fraction=fraction,
        t_usual=t_usual,
        t_grad=t_grad,
        t_bound=t_bound,
        t_step=t_step,
        bandwidth=bw,
        bytes=nbytes,
        loss_rel=cmp["loss_rel"],
        grad_rel=cmp["grad_rel"],
        two_layer=two,
        scaling=rows,
        passes=passes,
        backends=backends,
        device=str(device),
        device_name=name,
        gpu=gpu,
        step=steps,
    )
    if args.json:
        write_json(out, args.json)
    if gpu is not None and not all(r["agrees"] for r in gpu["variants"].values()):
        raise SystemExit("the GPU engine and the CPU engine disagree")
    return out
