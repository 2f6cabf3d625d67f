"""The fragility rule: passing evidence whose margin over its threshold is under twice
its spread over repeated runs (``_ext.fragility``), and the dashboard's flag."""

from __future__ import annotations

import pytest
from docutils import nodes

from _ext.dashboard import claim_rows
from _ext.fragility import (
    fragile_checks,
    fragile_note,
    is_fragile,
    margin,
    run_spreads,
    spread_of,
)
from _ext.pages import claims_dashboard

from conftest import check_record


def test_margin_is_measured_on_the_passing_side():
    assert margin(check_record("a", value=0.5, threshold=0.3)) == pytest.approx(0.2)
    below = check_record("b", value=0.1, threshold=0.3, relation="<=")
    assert margin(below) == pytest.approx(0.2)
    assert margin(check_record("c", value=0.2, threshold=0.3)) < 0
    with pytest.raises(ValueError, match="relation"):
        margin(check_record("d", relation="=="))


@pytest.mark.parametrize(
    "value, spread, fragile",
    [(0.5, 0.05, False), (0.5, 0.1, False), (0.5, 0.11, True), (0.35, 0.03, True)],
)
def test_fragile_when_the_margin_is_under_two_spreads(value, spread, fragile):
    chk = check_record("a", value=value, threshold=0.3, spread=spread)
    assert is_fragile(chk) is fragile
    assert (fragile_note(chk) is not None) is fragile


def test_only_passing_evidence_with_a_spread_is_flagged():
    assert not is_fragile(check_record("a", value=0.31, threshold=0.3))  # no spread
    control = check_record("b", value=0.31, threshold=0.3, spread=1.0, role="control")
    assert not is_fragile(control)
    failed = check_record("c", value=0.2, threshold=0.3, spread=1.0, passed=False)
    assert not is_fragile(failed)
    # a spread over other executions counts beside the recorded one
    chk = check_record("d", value=0.5, threshold=0.3, spread=0.01)
    assert spread_of(chk, 0.2) == 0.2 and is_fragile(chk, 0.2)
    assert spread_of(check_record("e")) is None


def test_spreads_over_executions_leave_out_timings():
    def execution(value, timing):
        checks = [
            check_record("a", value=value, threshold=0.3),
            check_record("t", value=timing, threshold=1.0),
        ]
        return {"ch": {"checks": checks, "volatile": ["t"]}}

    one, two = execution(0.5, 10.0), execution(0.36, 90.0)
    spreads = run_spreads([one, two])
    assert spreads == {("ch", "a"): pytest.approx(0.14)}
    assert run_spreads([one]) == {}
    (found,) = fragile_checks(one, spreads)
    assert (found["chapter"], found["name"]) == ("ch", "a")
    assert (
        found["margin"] == pytest.approx(0.2)
        and found["spread"] == spreads[("ch", "a")]
    )


def test_the_dashboard_flags_a_fragile_check():
    fragile = check_record(
        "imdb_cls_min_seed", value=0.35, threshold=0.3, spread=0.04, claim="C5"
    )
    sound = check_record(
        "imdb_value_min_seed", value=0.8, threshold=0.3, spread=0.01, claim="C5"
    )
    records = {"04_real_data": {"checks": [fragile, sound]}}
    row = {r.claim.id: r for r in claim_rows(records)}["C5"]
    assert [c["fragile"] is not None for c in row.checks] == [True, False]

    def link(chapter, anchor, text):
        return nodes.Text(f"[{chapter}]")

    out, _ = claims_dashboard(records, link, lambda label: None, "now")
    text = "".join(n.astext() for n in out)
    assert text.count("fragile: margin 0.05 under 2 × its spread 0.04") == 2


def test_the_script_lists_the_fragile_checks_of_an_execution(tmp_path, capsys):
    import importlib.util
    import json
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "scripts" / "fragile_checks.py"
    spec = importlib.util.spec_from_file_location("fragile_checks", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for folder, value in (("cpu", 0.43), ("gpu", 0.28)):
        (tmp_path / folder).mkdir()
        chk = check_record("u", value=value, threshold=0.3, passed=value >= 0.3)
        record = {"checks": [chk, check_record("v", value=0.9, threshold=0.3)]}
        (tmp_path / folder / "04_real_data.json").write_text(json.dumps(record))
    assert module.main([str(tmp_path / "cpu"), str(tmp_path / "gpu")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("1 of 2 passing evidence checks are fragile")
    assert "04_real_data  u: 0.43 >= 0.3, margin 0.13, spread 0.15" in out
