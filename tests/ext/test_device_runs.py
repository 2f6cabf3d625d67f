"""Records of two devices compared within each value's tolerance."""

import math

import pytest

from _ext.device_runs import (
    TOLERANCES,
    Tolerance,
    compare_devices,
    tolerance_for,
)


def _record(glued, checks=(), volatile=()):
    return {
        "glued": glued,
        "checks": [{"name": n, "passed": ok} for n, ok in checks],
        "volatile": list(volatile),
    }


def test_rules_have_reasons_and_a_catch_all():
    assert all(rule.why for rule in TOLERANCES)
    assert tolerance_for("03_implicit_bias", "corr").rtol == 1e-6
    assert tolerance_for("04_real_data", "test_acc").atol == 5e-3
    assert tolerance_for("04_real_data", "loss").rtol == 1e-3
    assert tolerance_for("04a_paper_protocol", "imdb_lr3_test_gap").atol == 7e-3
    # a pattern with alternatives: correlations of trained embeddings, absolute
    for name in ("imdb_lr3_picture_end", "mlp_rho_p_partial_low_threshold"):
        assert tolerance_for("05b_mlp_head", name).atol == 2e-3
    assert tolerance_for("02_one_step", "imdb_rel_increment").rtol == 0.0
    assert tolerance_for("05e_xor", "xor_one_layer_at_1_2").kind == "count"
    assert tolerance_for("04a_paper_protocol", "imdb_lr2_cls_bins_end").kind == (
        "chaotic"
    )
    with pytest.raises(ValueError, match="kind"):
        Tolerance("a:*", 0, 0, "only a", "sometimes")
    with pytest.raises(ValueError, match="no tolerance"):
        tolerance_for("x", "y", rules=(Tolerance("a:*", 0, 0, "only a"),))


def test_values_within_and_outside_tolerance():
    cpu = {
        "03_x": _record(
            {"r": 0.5, "path": [1.0, 2.0], "n": 3, "name": "a", "t_s": 1.0},
            checks=[("r", True)],
            volatile=["t_s"],
        )
    }
    gpu = {
        "03_x": _record(
            {"r": 0.5 + 1e-9, "path": [1.0, 2.1], "n": 3, "name": "a", "t_s": 9.0},
            checks=[("r", True)],
            volatile=["t_s"],
        )
    }
    out = compare_devices(cpu, gpu)
    assert out.compared == 5 and out.volatile == 1  # r, path[0], path[1], n, name
    assert [(d.name, d.reason) for d in out.outside] == [
        ("path[1]", "outside tolerance")
    ]
    assert math.isclose(out.largest_relative, 0.1 / 2.1)
    assert out.largest_at == "03_x: path[1]" and not out.agree


def test_missing_values_chapters_and_flipped_checks_are_reported():
    cpu = {
        "a": _record({"x": 1.0}, checks=[("c", True)]),
        "b": _record({}),
    }
    gpu = {"a": _record({"y": 1.0}, checks=[("c", False)])}
    reasons = sorted(d.reason for d in compare_devices(cpu, gpu).outside)
    assert reasons == [
        "check outcome differs",
        "glued in one run only",
        "glued in one run only",
        "one run only",
    ]
    same = compare_devices(cpu, cpu)
    assert same.agree and same.largest_relative == 0.0


def test_counts_and_chaotic_runs():
    rules = (
        Tolerance("c:n_*", 0, 2, "outcomes that turn on rounding", "count"),
        Tolerance("c:end_*", 0, 0, "a run at the edge of stability", "chaotic"),
        Tolerance("*:*", 0, 0, "exact"),
    )
    cpu = {"c": _record({"n_a": 3, "n_b": 1, "n_c": 2, "end_x": 1.0, "y": 1.0})}
    gpu = {"c": _record({"n_a": 5, "n_b": 4, "n_c": 2.5, "end_x": 9.0, "y": 1.0})}
    out = compare_devices(cpu, gpu, rules)
    assert out.chaotic == 1 and out.compared == 4
    assert [(d.name, d.reason) for d in out.outside] == [
        ("n_b", "outside tolerance"),
        ("n_c", "not a count"),
    ]


def test_the_kept_h200_comparison_follows_these_tolerances():
    """The book keeps the H200 runs' comparisons (chapters/gpu_measurements.json: the
    first run, and the run executed twice under ``gpu_twice``), computed with these
    rules: every value outside names the rule that applies to it now, and lies outside
    that rule."""
    import json
    import re

    from conftest import ROOT

    data = json.loads((ROOT / "chapters" / "gpu_measurements.json").read_text())
    runs = [data] + ([data["gpu_twice"]] if "gpu_twice" in data else [])
    for run in runs:
        assert run["provenance"]["commit"] and run["provenance"]["how"]
    for d in (d for run in runs for d in run["comparison"]["outside"]):
        if d["reason"] != "outside tolerance":
            continue
        rule = tolerance_for(d["chapter"], re.sub(r"\[.*$", "", d["name"]))
        assert (rule.kind, rule.rtol, rule.atol, rule.why) == (
            d["kind"],
            d["rtol"],
            d["atol"],
            d["why"],
        )
        assert abs(d["cpu"] - d["gpu"]) > rule.atol + rule.rtol * abs(d["gpu"])
