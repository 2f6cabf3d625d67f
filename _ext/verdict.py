"""The verdict of a build, at the top of the landing page (``{claims-verdict}``): the
tally of the badges, every claim that is not PASS with its one-line reason, linked to
its block of the claims dashboard, and what a build guarantees."""

from __future__ import annotations

from docutils import nodes

from _ext.claim_status import check_counts
from _ext.counts import status_tally
from _ext.dashboard import ClaimRow, claim_rows
from _ext.pages import badge, comparison, make_para, math_text

__all__ = ["claims_verdict"]


def _reason(row: ClaimRow) -> list[nodes.Node]:
    """Why a claim's badge is not PASS, in one line: the statement of the paper that
    did not hold (NOT REPRODUCED: what its headline check measures, up to the first
    colon of its description, and the value), the claim's ``verdict`` (PASS (part),
    MEASURED), or what the status rule says."""
    status, claim = row.status, row.claim
    if status in ("NOT REPRODUCED", "FAIL"):
        chk = row.headline
        if chk is not None:
            missed = [
                c
                for c in row.paper_checks
                if c.get("role", "evidence") == "evidence" and not c["passed"]
            ]
            # what is measured, without how (after the first colon): one line
            what = (chk.get("what") or chk["name"]).split(": ")[0]
            out = [*math_text(what), nodes.Text(": ")]
            out += comparison(chk)
            if len(missed) > 1:
                out.append(nodes.Text(f" (and {len(missed) - 1} more)"))
            return out
    if claim.verdict:
        return math_text(claim.verdict)
    default = {
        "PASS (part)": "the checks cover part of the claim (see its caveat)",
        "MEASURED": "the paper states nothing to verify; the checks are the book's "
        "own measurements",
        "NOT CHECKED": "no evidence of this build is tagged with this claim",
    }
    return [nodes.Text(default.get(status, ""))]


def claims_verdict(records: dict[str, dict]) -> list[nodes.Node]:
    """The verdict of a build, for the top of the landing page: the tally of badges,
    every claim that is not PASS with its one-line reason (linked to its block of the
    dashboard), the claims whose PASS rests on statements measured without assertion
    alone, and what a build guarantees."""
    rows = claim_rows(records)
    box = nodes.container(classes=["attnbook-verdict"], ids=["verdict"])
    head = make_para(
        nodes.strong(text="Verdict of this build. "),
        nodes.Text(f"Of the paper's {len(rows)} claims: "),
        classes=("attnbook-summary",),
    )
    for k, (status, n) in enumerate(status_tally(rows).items()):
        head += nodes.Text(", " if k else "")
        head += badge(status)
        head += nodes.Text(f" {n}")
    head += nodes.Text(".")
    box += head
    items = nodes.bullet_list(classes=["attnbook-verdict-list"])
    for row in rows:
        if row.status == "PASS":
            continue
        para = make_para(badge(row.status), nodes.Text(" "))
        ref = nodes.reference(
            "", "", refuri=f"#claim-{row.claim.id.lower()}", internal=True
        )
        ref += nodes.strong(text=row.claim.id)
        para += ref
        para += nodes.Text(": ")
        for node in _reason(row):
            para += node
        item = nodes.list_item()
        item += para
        items += item
    if items.children:
        box += items
    only_measured = [
        r.claim.id
        for r in rows
        if r.status == "PASS"
        and r.evidence
        and not any(c.get("asserted", True) for c in r.evidence)
    ]
    counts = check_counts([c for r in records.values() for c in r["checks"]])
    guarantee = (
        f"A build stops at the first asserted check that fails: all "
        f"{counts['asserted']} passed. A statement measured without assertion that "
        "does not hold makes its claim NOT REPRODUCED."
    )
    if only_measured:
        guarantee += f" The PASS of {', '.join(only_measured)} rests on these alone."
    box += make_para(nodes.Text(guarantee), classes=("attnbook-guarantee",))
    return [box]
