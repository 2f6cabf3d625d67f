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
    assert tolerance_for("04_real_data", "test_acc").atol == 2e-3
    assert tolerance_for("04_real_data", "loss").rtol == 1e-3
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
