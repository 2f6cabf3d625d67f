"""The Performance page's tables of GPU measurements."""

import json

import pytest

from benchmarks import gpu_report


def _bench(name, t_grad, graph=None):
    return {
        "device_name": name,
        "t_grad": t_grad,
        "t_step": 2 * t_grad,
        "t_usual": 100 * t_grad,
        "t_bound": t_grad / 4,
        "bandwidth": 2e12,
        "gpu": graph and {"graph_s": graph, "graph_step_s": 3 * graph},
    }


MEASURED = {
    "bench_cpu": _bench("Some CPU", 0.1),
    "bench_gpu": _bench("Some GPU", 0.002, graph=0.0001),
    "chapters": [
        {
            "chapter": "02_one_step",
            "workload": "synthetic",
            "cpu_2_cores_s": 20.0,
            "gpu_s": 50.0,
            "policy_s": 20.0,
            "cpu_rc": 0,
            "gpu_rc": 0,
        },
        {
            "chapter": "04_real_data",
            "workload": "real",
            "cpu_2_cores_s": 190.0,
            "gpu_s": 60.0,
            "policy_s": 60.0,
            "cpu_rc": 0,
            "gpu_rc": 1,
        },
    ],
    "comparison": {
        "chapters": ["02_one_step"],
        "compared": 1200,
        "volatile": 4,
        "largest_relative": 3e-7,
        "largest_at": "02_one_step: x",
        "outside": [],
    },
}


def test_tables_from_measurements(tmp_path):
    assert gpu_report.load_gpu_measurements(tmp_path) is None
    (tmp_path / gpu_report.MEASUREMENTS_FILE).write_text(json.dumps(MEASURED))
    m = gpu_report.load_gpu_measurements(tmp_path / "missing", tmp_path)
    engine = gpu_report.engine_table(m)
    assert list(engine.columns) == [
        "CPU, 2 cores (Some CPU)",
        "GPU, CPU engine's form (Some GPU)",
        "GPU, GPU form in a CUDA graph, dense passes by library (Some GPU)",
    ]
    grad = engine.loc["full-batch gradient (ms)"].tolist()
    assert grad == pytest.approx([100.0, 2.0, 0.1])
    assert engine.loc["fraction of the bound"].tolist() == pytest.approx(
        [0.25, 0.25, 5.0]
    )
    chapters = gpu_report.chapter_table(m)
    assert chapters.loc["04_real_data", "ran through"] == "no"
    assert chapters.loc["02_one_step", "by workload (s)"] == 20.0
    text = gpu_report.comparison_summary(m)
    assert "1,200 recorded values" in text and "within its tolerance" in text
    assert gpu_report.outside_table(m).empty
    assert gpu_report.provenance(m) == ""


def test_both_dense_passes_and_a_stopped_chapter():
    variant = {"graph_s": 2e-4, "graph_step_s": 3e-4, "eager_s": 2e-3}
    gpu = dict(_bench("Some GPU", 0.002), gpu={"variants": {"library": variant}})
    gpu["gpu"]["variants"]["triton"] = dict(variant, graph_s=1e-4)
    outside = [
        {"chapter": "04", "name": "x", "cpu": 1.0, "gpu": 2.0, "reason": r}
        for r in ("outside tolerance", "glued in one run only")
    ] + [{"chapter": "04", "name": "check c", "cpu": True, "gpu": None}]
    outside[-1]["reason"] = "check outcome differs"
    m = dict(
        MEASURED,
        bench_gpu=gpu,
        comparison=dict(MEASURED["comparison"], outside=outside, chaotic=7),
        provenance={
            "machine": "M",
            "date": "D",
            "commit": "C",
            "how": "H.",
            "comparison": "R",
        },
    )
    engine = gpu_report.engine_table(m)
    assert engine.loc["full-batch gradient (ms)"].tolist()[2:] == pytest.approx(
        [0.2, 0.1]
    )
    assert engine.loc["the same form without the graph (ms)"].tolist()[3] == 2.0
    text = gpu_report.comparison_summary(m)
    assert "7 values of runs whose outcome turns on rounding" in text
    assert (
        "3 lie outside" in text and "2 of them only because a chapter stopped" in text
    )
    table = gpu_report.outside_table(m)
    assert table["name"].tolist() == ["x", "2 values and checks"]
    assert "Commit: C." in gpu_report.provenance(m)


def test_a_file_of_something_else_is_refused(tmp_path):
    (tmp_path / gpu_report.MEASUREMENTS_FILE).write_text("[1, 2]")
    with pytest.raises(ValueError, match="gpu_check"):
        gpu_report.load_gpu_measurements(tmp_path)


def _twice_row(chapter, compared, differ, timed=()):
    return {
        "chapter": chapter,
        "workload": "real",
        "gpu_first_s": 40.0,
        "gpu_second_s": 41.0 if compared is not None else None,
        "beside": "alone on the GPU",
        "compared": compared,
        "differ": differ,
        "check_values_differ": list(timed),
        "cpu_build_s": 400.0,
    }


def _u_entry(adam, gd):
    return {"adam_u_min": adam, "gd_u": {f"run_{i}": u for i, u in enumerate(gd)}}


TWICE = {
    "tests": {"pytest -m gpu": {"summary": "14 passed"}},
    "chapters": [
        _twice_row("04_real_data", 288, 0),
        _twice_row("performance", 15, 0, timed=["perf_speedup"]),
        _twice_row("01_setup", None, None),
    ],
    "u_needs_adam": {
        "imdb": {
            "threshold": 0.3,
            "cpu": _u_entry(0.53, [0.10, 0.18, 0.05]),
            # two roundings that coincide on the device: one distinct run fewer
            "gpu": _u_entry(0.50, [0.15, 0.15, 0.11]),
        }
    },
}


def test_twice_run_tables():
    assert gpu_report.twice_run(MEASURED) is None
    run = gpu_report.twice_run(dict(MEASURED, gpu_twice=TWICE))
    table = gpu_report.twice_table(run)
    assert table.loc["04_real_data", "values that differ"] == 0
    assert table["GPU, second run (s)"].isna()["01_setup"]
    text = gpu_report.twice_summary(run)
    assert text.startswith("2 chapters executed twice on the GPU: 303 glued values")
    assert "0 of them different" in text and "except perf_speedup" in text
    assert "pytest -m gpu: 14 passed" in text
    u = gpu_report.u_table(run).set_index("runs of")
    assert u.loc["CPU", "difference"] == pytest.approx(0.53 - 0.18)
    assert u.loc["GPU", "difference"] == pytest.approx(0.50 - 0.15)
    assert u.loc["GPU", "distinct GD runs"] == 2
    # over both devices: the smallest Adam seed against the largest GD run of either
    assert u.loc["both", "difference"] == pytest.approx(0.50 - 0.18)
    assert u.loc["both", "GD runs"] == 6 and bool(u.loc["both", "holds"])
    with pytest.raises(ValueError, match="gpu_twice"):
        gpu_report.twice_run(dict(MEASURED, gpu_twice=[1]))
