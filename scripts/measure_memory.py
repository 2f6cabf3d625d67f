"""Run a command and sample, once a second, its process tree: how many Jupyter kernels
are alive and the resident memory of the whole tree (Linux, from /proc).

    python scripts/measure_memory.py [--out FILE.json] -- COMMAND ...

Prints the peak number of live kernels and the peak total resident memory (RSS summed
over the processes, so library pages shared between processes are counted once per
process: an upper bound of what the tree needs), and with ``--out`` writes every
sample. Exits with the command's exit status. The README's memory line comes from it:
``python scripts/measure_memory.py -- python -m _ext.execution --jobs 2``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

PAGE = os.sysconf("SC_PAGE_SIZE")


def _processes() -> dict[int, tuple[int, int, str]]:
    """Every process: pid -> (parent pid, resident bytes, command line)."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            rss_pages = int((entry / "statm").read_text().split()[1])
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError, IndexError):
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] == "Z":
            continue
        out[int(entry.name)] = (int(fields[1]), rss_pages * PAGE, cmd)
    return out


def _tree(root: int, procs: dict[int, tuple[int, int, str]]) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in procs:
            found.append(pid)
        todo.extend(children.get(pid, ()))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--every", type=float, default=1.0)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command to run after --")
    t0 = time.monotonic()
    child = subprocess.Popen(command)
    samples = []
    while child.poll() is None:
        procs = _processes()
        tree = _tree(child.pid, procs)
        kernels = [p for p in tree if "ipykernel" in procs[p][2]]
        samples.append(
            {
                "t": round(time.monotonic() - t0, 1),
                "kernels": len(kernels),
                "processes": len(tree),
                "rss_bytes": sum(procs[p][1] for p in tree),
            }
        )
        time.sleep(args.every)
    peak_kernels = max((s["kernels"] for s in samples), default=0)
    peak_rss = max((s["rss_bytes"] for s in samples), default=0)
    print(
        f"[measure_memory] {len(samples)} samples over {time.monotonic() - t0:.0f} s: "
        f"peak {peak_kernels} live kernels, peak resident memory of the tree "
        f"{peak_rss / 2**30:.2f} GB; exit status {child.returncode}",
        flush=True,
    )
    if args.out:
        args.out.write_text(json.dumps(samples) + "\n")
    return child.returncode


if __name__ == "__main__":
    sys.exit(main())
