"""The least time the chapters' training can take on this machine: each chapter's code
cells run (as ``scripts/profile_chapters.py`` runs them, without records) while every
optimizer update is counted with the bytes it must move at the very least, its trained
tensors and, for Adam, their two moments, each read once and written once (the fused
step's sweep over ``E`` and the torch step of ``p`` and ``v`` after it count as two
updates). The gradient, the data and everything else are left out, so the floor is
below what any implementation can reach. Its time is those bytes at the bandwidth of a
large array copy, measured in the same process.

    python scripts/training_floor.py 04a_paper_protocol 05b_mlp_head
    python scripts/training_floor.py --all --out _build/floor

For each chapter it prints one line and writes ``<out>/<chapter>.json``: the updates of
each kind, the bytes, the floor in seconds and the chapter's wall time in this run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]
#: copies of a trained tensor a step reads and writes at the least: the tensor, and
#: Adam's two moments
COPIES = {"adam": 3, "gd": 1}


def count_steps(ledger: Counter) -> Callable[[], None]:
    """Count every optimizer step from now on into ``ledger``: the compiled fused step
    of the one-layer model and every ``torch.optim`` step; returns what stops it."""
    import torch
    from torch.optim.optimizer import register_optimizer_step_post_hook

    from attnbook.engine import fused

    def add(kind: str, tensors) -> None:
        ledger[f"{kind} updates"] += 1
        ledger["bytes"] += sum(
            2 * COPIES[kind] * t.numel() * t.element_size() for t in tensors
        )

    def on_torch_step(opt, args, kwargs) -> None:
        kind = "adam" if isinstance(opt, torch.optim.Adam) else "gd"
        params = [p for g in opt.param_groups for p in g["params"]]
        add(kind, [p for p in params if p.grad is not None])

    hook = register_optimizer_step_post_hook(on_torch_step)
    original = fused.fused_step

    def counted(E, G, P, **options):
        add("gd" if options.get("moments") is None else "adam", [E])
        return original(E, G, P, **options)

    fused.fused_step = counted

    def stop() -> None:
        hook.remove()
        fused.fused_step = original

    return stop


def floor(chapter: str, out: Path) -> dict:
    """Run ``chapters/<chapter>.ipynb``'s code cells with the updates counted; write and
    return the summary."""
    from profile_chapters import run_cells

    from benchmarks.timing import copy_bandwidth

    ledger: Counter = Counter()
    count_steps(ledger)
    t0 = time.perf_counter()
    run_cells(chapter)
    wall = time.perf_counter() - t0
    bandwidth = copy_bandwidth(repeats=20)
    summary = {
        "chapter": chapter,
        "wall_s": round(wall, 1),
        **{k: int(v) for k, v in ledger.items()},
        "copy_GB_per_s": round(bandwidth / 1e9, 2),
        "floor_s": round(ledger["bytes"] / bandwidth, 1),
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{chapter}.json").write_text(json.dumps(summary, indent=1))
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chapters", nargs="*")
    parser.add_argument("--all", action="store_true", help="every chapter")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "floor")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the child's chapter
    args = parser.parse_args()
    if args.one:
        print(json.dumps(floor(args.one, args.out.resolve())), flush=True)
        return
    names = args.chapters
    if args.all:
        from profile_chapters import chapter_names

        names = chapter_names()
    for name in names:  # one process each: the hooks and imports of one stay there
        command = [sys.executable, __file__, "--one", name, "--out", str(args.out)]
        subprocess.run(command, check=True, cwd=ROOT)


if __name__ == "__main__":
    main()
