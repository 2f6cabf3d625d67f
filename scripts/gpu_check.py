#!/usr/bin/env python3
"""Every measurement of the book on a GPU machine, in one resumable script.

    python scripts/gpu_check.py [--budget SECONDS] [--out DIR]

Run from the repository root on a machine with a CUDA GPU. In order, it

1. records the machine and the software (``env.json``); stops when torch sees no GPU;
2. runs the tests marked ``gpu`` and the GPU engine's CPU tests (``tests.log``);
3. runs the benchmark on the GPU (``bench_cuda.json``, ``bench_cuda.log``) with
   ``ATTNBOOK_GPU_ENGINE=0``, so that its ``engine`` line times the CPU engine's form
   on the GPU (before) and its ``GPU gradient`` line the GPU form, eager and replayed
   from a CUDA graph (after); and, beside it, the benchmark on two CPU cores
   (``bench_cpu.json``, ``bench_cpu.log``);
4. runs every chapter twice, side by side: on two CPU cores with the GPU hidden
   (``CUDA_VISIBLE_DEVICES=``), and on two other CPU cores with everything sent to the
   GPU (``ATTNBOOK_DEVICE=cuda``), each writing its records (``records/cpu``,
   ``records/gpu``) and its time (``chapters.json``; logs in ``logs/``);
5. compares the two sets of records value by value within each value's tolerance
   (:mod:`_ext.device_runs`; ``comparison.json``);
6. runs the chapters of ``--twice`` a second time on the GPU, alone, and compares the
   two GPU runs for identical bits (``twice.json``, records in ``records/gpu_again``);
7. writes ``gpu_measurements.json``: what the Performance page shows.

Work done is kept in ``_build/gpu_check`` and skipped when the script runs again, so a
machine that allows ten minutes a command finishes the whole in a few calls: the script
stops starting new work when less than the next item's expected time is left of
``--budget`` (default 560 s), copies what it has to ``--out`` (default ``$OUT`` when
set, else ``_build/gpu_check/out``) and says whether everything is done. The review
corpora are read from ``$ATTNBOOK_DATA_DIR``, else ``shared/data`` or
``../shared/data``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STATE = ROOT / "_build" / "gpu_check"


def book_chapters() -> list[str]:
    """The notebooks under ``chapters/`` that start a chapter (``start_chapter``)."""
    names = []
    for nb in sorted((ROOT / "chapters").glob("*.ipynb")):
        cells = json.loads(nb.read_text())["cells"]
        if any("start_chapter(" in "".join(c["source"]) for c in cells):
            names.append(nb.stem)
    return names


CHAPTERS = book_chapters()
WORKLOAD_ARG = re.compile(r"start_chapter\([^)]*workload\s*=\s*[\"'](\w+)[\"']")


def workload(chapter: str) -> str:
    """What the chapter says it computes (``workload=`` of its ``start_chapter`` call;
    ``"real"`` when it does not say): its policy run is its CPU run for
    ``"synthetic"`` and its GPU run for ``"real"``."""
    nb = json.loads((ROOT / "chapters" / f"{chapter}.ipynb").read_text())
    source = "\n".join("".join(c["source"]) for c in nb["cells"])
    found = WORKLOAD_ARG.search(source)
    return found.group(1) if found else "real"


# two cores each, as a notebook runtime has; the CPU benchmark runs on cores of its own
CPU_CORES = {"cpu": "0,1", "gpu": "2,3", "bench_cpu": "4,5", "bench_gpu": "6,7"}
MODULES = (
    "torch",
    "triton",
    "numpy",
    "pandas",
    "pyarrow",
    "scipy",
    "cvxpy",
    "matplotlib",
    "seaborn",
    "datasets",
    "tqdm",
    "IPython",
    "pytest",
)

sys.path.insert(0, str(ROOT))


def log(msg: str) -> None:
    print(f"[gpu_check {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def load(name: str, default):
    path = STATE / name
    return json.loads(path.read_text()) if path.exists() else default


def save(name: str, data) -> None:
    STATE.mkdir(parents=True, exist_ok=True)
    (STATE / name).write_text(json.dumps(data, indent=1, default=str) + "\n")


def data_dir() -> str | None:
    for folder in (
        os.environ.get("ATTNBOOK_DATA_DIR"),
        ROOT / "shared" / "data",
        ROOT.parent / "shared" / "data",
        STATE / "synthetic_data",  # written by an earlier call when none of these was
    ):
        if folder and (Path(folder) / "imdb" / "train.parquet").exists():
            return str(Path(folder).resolve())
    return None


def synthetic_corpora(folder: Path, seed: int = 0) -> str:
    """Review corpora of the real ones' shape where those are missing (timings only:
    the chapters' claims about real reviews are not expected to hold on them).

    IMDB: 25,000 train and test reviews of ~230 words; Yelp: 16,001 train and 3,999
    test reviews of ~130 words. Words follow a Zipf law over 30,000 types; 200 of them
    lean positive and 200 negative, so that a label can be learned.
    """
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)

    def word(i: int) -> str:  # letters only, as the tokenizer reads them
        out = ""
        while True:
            i, r = divmod(i, 26)
            out += chr(ord("a") + r)
            if i == 0:
                return "x" + out

    words = np.array([word(i) for i in range(30_000)])
    zipf = 1.0 / np.arange(1, words.size + 1)
    sizes = {"imdb": (25_000, 25_000, 230), "yelp": (16_001, 3_999, 130)}
    for name, (n_train, n_test, mean_len) in sizes.items():
        for split, n in (("train", n_train), ("test", n_test)):
            labels = rng.integers(0, 2, size=n)
            lengths = np.maximum(5, rng.gamma(2.0, mean_len / 2.0, size=n).astype(int))
            drawn = rng.choice(words.size, size=lengths.sum(), p=zipf / zipf.sum())
            texts = []
            for label, bag in zip(labels, np.split(drawn, np.cumsum(lengths)[:-1])):
                lean = rng.integers(0, 200, size=max(1, bag.size // 20))
                bag = np.concatenate([bag, 1000 + lean + 200 * (1 - label)])
                texts.append(" ".join(words[rng.permutation(bag)]))
            (folder / name).mkdir(parents=True, exist_ok=True)
            pd.DataFrame({"text": texts, "label": labels.astype(np.int64)}).to_parquet(
                folder / name / f"{split}.parquet"
            )
    return str(folder)


def base_env(mode: str) -> dict[str, str]:
    """The environment of a run on two CPU cores: ``cpu`` hides the GPU, ``gpu`` sends
    every workload to it."""
    env = dict(
        os.environ,
        OMP_NUM_THREADS="2",
        MKL_NUM_THREADS="2",
        MPLBACKEND="Agg",
        PYTHONHASHSEED="0",
        TQDM_DISABLE="1",
    )
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env["ATTNBOOK_CACHE_DIR"] = str(STATE / f"kernels-{mode}")
    if data_dir():
        env["ATTNBOOK_DATA_DIR"] = data_dir()
    if mode == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""
    else:
        env["ATTNBOOK_DEVICE"] = "cuda"
    return env


def pinned(mode: str, cmd: list[str]) -> list[str]:
    """``cmd`` on the two cores of ``mode`` (when ``taskset`` and the cores exist)."""
    if shutil.which("taskset") and (os.cpu_count() or 1) >= 8:
        return ["taskset", "-c", CPU_CORES[mode], *cmd]
    return cmd


# ---------------------------------------------------------------------------- stages
def stage_env() -> dict:
    env = load("env.json", None)
    if env:
        return env
    import torch

    env = {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "cuda_available": torch.cuda.is_available(),
        "cuda": torch.version.cuda,
        "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "cpu_count": os.cpu_count(),
        "data_dir": data_dir(),
        "modules": {m: importlib.util.find_spec(m) is not None for m in MODULES},
    }
    try:
        from attnbook.runtime import cpu_name

        env["cpu"] = cpu_name()
    except ImportError as err:
        env["attnbook_import_error"] = repr(err)
    save("env.json", env)
    return env


def stage_tests(timeout: float) -> dict:
    done = load("tests.json", None)
    if done:
        return done
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-rs",
        "tests/engine/test_gpu.py",
        "tests/engine/test_reduction_order.py",
        "tests/ext/test_device_runs.py",
    ]
    env = base_env("gpu")
    env.pop("ATTNBOOK_DEVICE")
    t0 = time.time()
    try:
        run = subprocess.run(
            cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        log("tests: cut by the budget, run again next call")
        return {}
    (STATE / "tests.log").write_text(run.stdout + run.stderr)
    result = {
        "rc": run.returncode,
        "seconds": round(time.time() - t0, 1),
        "summary": (run.stdout.strip().splitlines() or [""])[-1],
    }
    save("tests.json", result)
    log(f"tests: {result['summary']} (exit {run.returncode})")
    return result


def start_bench(mode: str) -> subprocess.Popen | None:
    """Start the benchmark on ``mode``'s device (``None``: done or failed before)."""
    if (STATE / f"bench_{mode}.json").exists() or (
        STATE / f"bench_{mode}_error.json"
    ).exists():
        return None
    args = [
        "--device",
        "cuda" if mode == "gpu" else "cpu",
        "--json",
        str(STATE / f"bench_{mode}.json"),
    ]
    if mode == "cpu":  # on two cores: one pass of the padded implementation, no scaling
        args += ["--usual-repeats", "1", "--no-scaling"]
    env = base_env(mode)
    env["ATTNBOOK_GPU_ENGINE"] = "0"  # the engine line: the CPU engine's form (before)
    env.pop("ATTNBOOK_DEVICE", None)
    out = open(STATE / f"bench_{mode}.log", "w")
    cmd = pinned(f"bench_{mode}", [sys.executable, "-m", "benchmarks", *args])
    return subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
    )


def finish_bench(mode: str, proc: subprocess.Popen | None, deadline: float) -> None:
    """Wait for a benchmark until the deadline; a failure is recorded (and not run
    again), one cut by the deadline is run again by the next call."""
    if proc is None:
        return
    try:
        rc = proc.wait(timeout=max(1.0, deadline - time.time()))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        (STATE / f"bench_{mode}.json").unlink(missing_ok=True)
        log(f"the {mode} benchmark did not finish within the budget: redone next call")
        return
    if rc != 0:
        tail = (STATE / f"bench_{mode}.log").read_text().splitlines()[-40:]
        save(f"bench_{mode}_error.json", {"rc": rc, "log_tail": tail})
        log(f"the {mode} benchmark FAILED (exit {rc}): see bench_{mode}.log")
    else:
        log(f"the {mode} benchmark: done")


RUNNER = r"""
import json, sys, traceback
path = sys.argv[1]
cells = [c for c in json.load(open(path))["cells"] if c["cell_type"] == "code"]
ns = {"__name__": "__main__"}
try:
    from IPython.display import display
    ns["display"] = display
except ImportError:
    ns["display"] = print
errors = []
for i, cell in enumerate(cells):
    src = "".join(cell["source"])
    if i == 0 and "pip" in src and "install" in src:
        continue  # the install cell: attnbook is on PYTHONPATH here
    keep = [l for l in src.splitlines() if not l.lstrip().startswith(("%", "!"))]
    src = "\n".join(keep)
    try:
        exec(compile(src, f"<{path} cell {i}>", "exec"), ns)
    except Exception:
        errors.append(i)
        traceback.print_exc()
print(json.dumps({"cells": len(cells), "errors": errors}))
sys.exit(1 if errors else 0)
"""


def start_chapter_run(
    mode: str, chapter: str, records: str | None = None
) -> subprocess.Popen:
    """Run ``chapter`` on ``mode``'s device, its records into ``records/<records>``
    (default: ``records/<mode>``)."""
    records = records or mode
    env = base_env(mode)
    env["ATTNBOOK_RECORD_DIR"] = str(STATE / "records" / records)
    env["ATTNBOOK_RUN_ID"] = f"gpu_check-{records}"
    (STATE / "logs").mkdir(parents=True, exist_ok=True)
    out = open(STATE / "logs" / f"{chapter}.{records}.log", "w")
    nb = ROOT / "chapters" / f"{chapter}.ipynb"
    cmd = pinned(mode, [sys.executable, "-c", RUNNER, str(nb)])
    # cwd: the notebook's folder, as Jupyter runs it
    return subprocess.Popen(
        cmd, cwd=nb.parent, env=env, stdout=out, stderr=subprocess.STDOUT
    )


def expected_seconds(mode: str, chapter: str) -> float:
    """A chapter's expected time: its last measured time when there is one, else a
    guess from two-core CPU runs."""
    guess = {"02_one_step": 60, "03_implicit_bias": 350, "04_real_data": 120}
    guess |= {"04b_u_origin": 200}
    return guess.get(chapter, 120) * (1.0 if mode == "gpu" else 1.2)


def stage_chapters(
    deadline: float, chapters: list[str], gpu_free: threading.Event
) -> dict:
    """Run the chapters not done yet, one CPU and one GPU chapter at a time, side by
    side, while the budget lasts; GPU chapters start once ``gpu_free`` is set."""
    times = load("chapters.json", {"cpu": {}, "gpu": {}})
    queues = {m: [c for c in chapters if c not in times[m]] for m in ("cpu", "gpu")}
    running: dict[str, tuple[str, subprocess.Popen, float]] = {}
    while any(queues.values()) or running:
        if time.time() >= deadline:
            queues = {"cpu": [], "gpu": []}  # what is left: next call
        for mode in ("cpu", "gpu"):
            if mode in running or not queues[mode]:
                continue
            if mode == "gpu" and not gpu_free.is_set():
                continue
            chapter = queues[mode][0]
            if time.time() + expected_seconds(mode, chapter) > deadline:
                queues[mode] = []  # next call
                continue
            queues[mode].pop(0)
            running[mode] = (chapter, start_chapter_run(mode, chapter), time.time())
            log(f"{chapter} on {mode}: started")
        for mode, (chapter, proc, t0) in list(running.items()):
            if proc.poll() is None and time.time() < deadline:
                continue
            if proc.poll() is None:  # out of budget: stopped, redone next call
                proc.kill()
                proc.wait()
                log(f"{chapter} on {mode}: stopped at the budget, redone next call")
            else:
                seconds = round(time.time() - t0, 1)
                times[mode][chapter] = {"seconds": seconds, "rc": proc.returncode}
                save("chapters.json", times)
                log(f"{chapter} on {mode}: {seconds} s (exit {proc.returncode})")
            del running[mode]
        time.sleep(0.5)
    return times


def stage_compare() -> dict | None:
    from _ext.device_runs import compare_devices, comparison_summary
    from _ext.record_files import load_records

    for mode in ("cpu", "gpu"):  # a chapter that failed early left no record
        (STATE / "records" / mode).mkdir(parents=True, exist_ok=True)
    try:
        cpu = load_records(STATE / "records" / "cpu")
        gpu = load_records(STATE / "records" / "gpu")
    except (FileNotFoundError, ValueError) as err:
        log(f"comparison: {err}")
        return None
    out = compare_devices(cpu, gpu)
    result = comparison_summary(out, sorted(set(cpu) & set(gpu)))
    save("comparison.json", result)
    log(
        f"comparison: {out.compared} values in {len(result['chapters'])} chapters, "
        f"largest relative difference {out.largest_relative:.2e} "
        f"({out.largest_at}); {len(out.outside)} outside tolerance"
    )
    for d in result["outside"]:
        log(
            f"  outside: {d['chapter']}: {d['name']}: cpu {d['cpu']!r} gpu "
            f"{d['gpu']!r} ({d['reason']})"
        )
    return result


SAME_BITS = "the same chapter on the same device twice: the same bits"


def stage_twice(deadline: float, chapters: list[str]) -> dict:
    """Run each of ``chapters`` a second time on the GPU (after its first GPU run),
    alone, and compare the two runs' records for identical bits: every glued value
    and check (timings only counted). ``twice.json``: per chapter its seconds, exit
    status, the number of values compared and those that differ."""
    from _ext.device_runs import Tolerance, compare_devices
    from _ext.record_files import load_records

    done = load("twice.json", {})
    first = load("chapters.json", {"cpu": {}, "gpu": {}})["gpu"]
    for chapter in chapters:
        if chapter in done or first.get(chapter, {}).get("rc") != 0:
            continue
        if time.time() + expected_seconds("gpu", chapter) > deadline:
            break  # next call
        t0 = time.time()
        proc = start_chapter_run("gpu", chapter, records="gpu_again")
        try:
            rc = proc.wait(timeout=max(1.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            log(f"{chapter} on gpu, again: stopped at the budget, redone next call")
            break
        entry = {"seconds": round(time.time() - t0, 1), "rc": rc}
        if rc == 0:
            a = load_records(STATE / "records" / "gpu")[chapter]
            b = load_records(STATE / "records" / "gpu_again")[chapter]
            rules = (Tolerance("*:*", 0.0, 0.0, SAME_BITS),)
            out = compare_devices({chapter: a}, {chapter: b}, rules)
            entry["compared"] = out.compared
            entry["differ"] = [
                f"{d.name}: {d.reference!r} / {d.other!r}" for d in out.outside
            ]
        done[chapter] = entry
        save("twice.json", done)
        log(
            f"{chapter} on gpu, again: {entry['seconds']} s (exit {rc}); "
            f"{len(entry.get('differ', []))} of {entry.get('compared', 0)} values "
            "differ"
        )
    return done


def summary(env: dict) -> dict:
    def bench(mode: str) -> dict | None:
        b = load(f"bench_{mode}.json", None)
        if b is None:
            return None
        keep = (
            "device",
            "device_name",
            "t_usual",
            "t_grad",
            "t_step",
            "t_bound",
            "bandwidth",
            "bytes",
            "speedup",
            "bound_fraction",
            "gpu",
        )
        return {k: b.get(k) for k in keep}

    times = load("chapters.json", {"cpu": {}, "gpu": {}})
    rows = []
    for chapter in CHAPTERS:
        cpu, gpu = times["cpu"].get(chapter), times["gpu"].get(chapter)
        kind = workload(chapter)
        policy = cpu if kind == "synthetic" else gpu
        rows.append(
            {
                "chapter": chapter,
                "workload": kind,
                "cpu_2_cores_s": cpu and cpu["seconds"],
                "cpu_rc": cpu and cpu["rc"],
                "gpu_s": gpu and gpu["seconds"],
                "gpu_rc": gpu and gpu["rc"],
                "policy_s": policy and policy["seconds"],
            }
        )
    out = {
        "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "gpu": env.get("device"),
        "cpu": env.get("cpu"),
        "cpu_cores_used": 2,
        "torch": env.get("torch"),
        "triton": env.get("modules", {}).get("triton"),
        "bench_gpu": bench("gpu"),
        "bench_cpu": bench("cpu"),
        "chapters": rows,
        "bench_errors": {
            m: load(f"bench_{m}_error.json", None)
            for m in ("gpu", "cpu")
            if (STATE / f"bench_{m}_error.json").exists()
        },
        "comparison": load("comparison.json", None),
        "twice": load("twice.json", None),
        "tests": load("tests.json", None),
    }
    save("gpu_measurements.json", out)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--budget", type=float, default=560.0)
    ap.add_argument("--out", default=os.environ.get("OUT") or str(STATE / "out"))
    ap.add_argument("--chapters", default=",".join(CHAPTERS))
    ap.add_argument("--skip-cpu-bench", action="store_true")
    ap.add_argument(
        "--twice",
        default="02_one_step,04_real_data,04b_u_origin",
        help="chapters run a second time on the GPU, compared bit for bit",
    )
    args = ap.parse_args()
    deadline = time.time() + args.budget
    STATE.mkdir(parents=True, exist_ok=True)
    env = stage_env()
    log(
        f"env: torch {env['torch']}, CUDA {env['cuda_available']} ({env['device']}), "
        f"data {env['data_dir']}, modules missing: "
        f"{[m for m, ok in env['modules'].items() if not ok]}"
    )
    if not env["cuda_available"]:
        log("torch sees no CUDA device here: nothing to measure")
        return 2
    if env["data_dir"] is None:
        folder = STATE / "synthetic_data"
        if not (folder / "imdb" / "train.parquet").exists():
            log("no review corpora here: writing synthetic ones of their shape")
            synthetic_corpora(folder)
        os.environ["ATTNBOOK_DATA_DIR"] = str(folder)
        env["data_dir"] = f"{folder} (synthetic: timings only)"
        save("env.json", env)
    gpu_bench = start_bench("gpu")
    cpu_bench = None if args.skip_cpu_bench else start_bench("cpu")
    gpu_free = threading.Event()  # set once the GPU benchmark and tests are done

    def gpu_first() -> None:
        try:
            finish_bench("gpu", gpu_bench, deadline)
            stage_tests(max(1.0, deadline - time.time()))
        finally:
            gpu_free.set()

    first = threading.Thread(target=gpu_first)
    first.start()
    chapters = [c for c in args.chapters.split(",") if c]
    stage_chapters(deadline, chapters, gpu_free)
    first.join()
    finish_bench("cpu", cpu_bench, deadline)
    stage_compare()
    twice = [c for c in args.twice.split(",") if c]
    stage_twice(deadline, twice)
    result = summary(env)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for path in STATE.glob("*.json"):
        shutil.copy(path, out / path.name)
    for path in STATE.glob("*.log"):
        shutil.copy(path, out / path.name)
    if (STATE / "logs").exists():
        shutil.copytree(STATE / "logs", out / "logs", dirs_exist_ok=True)
    if (STATE / "records").exists():
        shutil.copytree(STATE / "records", out / "records", dirs_exist_ok=True)
    todo = [
        r["chapter"]
        for r in result["chapters"]
        if r["chapter"] in chapters
        and (r["cpu_2_cores_s"] is None or r["gpu_s"] is None)
    ]
    wanted = ("gpu",) if args.skip_cpu_bench else ("gpu", "cpu")
    missing_bench = [
        m
        for m in wanted
        if result[f"bench_{m}"] is None
        and not (STATE / f"bench_{m}_error.json").exists()
    ]
    twice_left = [
        c
        for c in twice
        if c not in (result["twice"] or {})
        and any(r["chapter"] == c and r["gpu_rc"] == 0 for r in result["chapters"])
    ]
    if todo or missing_bench or twice_left:
        log(
            f"NOT DONE: chapters left {todo}, benchmarks left {missing_bench}, second "
            f"GPU runs left {twice_left}; run the same command again"
        )
        return 3
    failed = [
        f"{r['chapter']} ({m})"
        for r in result["chapters"]
        for m, rc in (("cpu", r["cpu_rc"]), ("gpu", r["gpu_rc"]))
        if rc not in (0, None)
    ]
    if failed:
        log(f"chapters with a failed cell (see logs/): {failed}")
    log(f"ALL DONE: results in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
