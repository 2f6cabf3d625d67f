"""The claims of the paper and how the book's recorded checks verify them.

:data:`CLAIMS` lists the claims C1-C7 of the paper (C6 and C7 split into their parts) in
the book's words, with where each comes from and, where the book cannot verify a claim
as the paper states it, why. :func:`claim_rows` joins them with the checks recorded by a
run of the chapters (:mod:`attnbook.book.records`) into the rows of the claims dashboard
on the landing page; PASS and FAIL are computed from the records, never typed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Claim",
    "CLAIMS",
    "ClaimRow",
    "claim_rows",
    "other_checks",
    "required_chapters",
    "chapter_name_in_notebook",
    "result_labels",
    "attach_results",
]


@dataclass(frozen=True)
class Claim:
    """One claim of the paper as the book states it."""

    id: str
    statement: str
    source: str
    caveat: str = ""  # what the book cannot verify as stated, or what it reconstructed
    verifiable: bool = True
    partial: bool = (
        False  # the book's checks cover only part of the statement (see caveat)
    )


CLAIMS: tuple[Claim, ...] = (
    Claim(
        "C1",
        "One gradient step from a small random initialization aligns each embedding "
        "with the head: E_s·v grows in proportion to the average signed frequency α_s.",
        "paper, Lemma 4.1",
    ),
    Claim(
        "C2",
        "One step changes E_s·p by (η/2)α_s(v·p) up to a remainder of relative order "
        "σ: the change of E_s·v times the random-sign factor v·p/‖v‖² = O(1/√d) "
        "(checked: the fitted coefficient of α_s against (η/2)v·p over 20 seeds, and "
        "the correlation with the prediction). Relative to the initial spread of "
        "E_s·p the change is ηsd(α)/(2σ) times |N(0, 1)|, so whether E_s·p stays at "
        "the initialization scale depends on σ, not on d.",
        "paper, Lemma 4.2 (statement not available)",
        caveat=(
            "Reconstructed: the book proves and checks its own statement, not the "
            "paper's."
        ),
    ),
    Claim(
        "C3",
        "Under Assumption 1, gradient flow on p with E frozen after one step: ‖p‖ → "
        "∞, attention selects the important token of every sequence, p/‖p‖ → the "
        "max-margin direction. Verified when the moved part of each relevant "
        "embedding is at most half its random part (ratio r ≤ 0.5) and d ≥ V, from a "
        "random, small or zero p(0); for r ≳ 2.5 the flow abandons a whole class in "
        "most runs, and for r ≳ 10 in all, although the theorem's hypotheses hold.",
        "paper, Theorem 4.3 with Lemmas 4.4, 4.5",
        caveat=(
            "Assumption 1 is reconstructed from the abstract and the reviews. The "
            "paper states selection from a random initialization after a step from a "
            "small initialization, the limit r → ∞ at a fixed step; in the book's "
            "reconstruction every run abandons a class there (the regime map of the "
            "implicit-bias chapter), so that part is not reproduced."
        ),
        partial=True,
    ),
    Claim(
        "C4",
        "With several relevant tokens: (1, restated as the book's conjecture) when "
        "the moved part of the relevant embeddings is smaller than their random part "
        "(r ≲ 0.5), the flow keeps all attention on relevant tokens; (2) if the flow "
        "selects all relevant tokens of every sequence, its limit is their max-margin "
        "direction. Generically one relevant token per sequence is kept, and the "
        "limit is the max-margin direction of that selection.",
        "authors' answers to reviewers",
        caveat=(
            "Part (1) as the authors state it (a converging p selects a relevant "
            "token in every sequence) does not hold: collapsed runs at large r "
            "satisfy Assumption 1 yet put a whole class's attention on irrelevant "
            "tokens. Partially relevant tokens are open in the paper; the book's "
            "checks on them (partial_*) test its own prediction, not a statement of "
            "the paper."
        ),
    ),
    Claim(
        "C5",
        "Real data (IMDB, Yelp), all parameters trained: the bin average of E_s·v "
        "increases with P(1|s) − P(0|s); the bin average of E_s·p is U-shaped.",
        "paper, Section 5 figures",
        caveat=(
            "Checked on IMDB and a class-balanced Yelp sample, on three training "
            "seeds, as rank correlations plain and given the log document "
            "frequency, in the paper's binning and the book's, and against a "
            "shuffled-label null, which shows a weaker form of the same picture "
            "(part of it comes from fitting labels at all). The U appears only when"
            " E trains together with p, and within the chapter's budget only under "
            "Adam: the theorem's setting (one step, then E frozen) shows none. The "
            "paper's synthetic generator (its Eq. 15) is not recovered; the book's "
            "generator conditioned on Assumption 1 stands in for it."
        ),
    ),
    Claim(
        "C6a",
        "Untrained embeddings (random E fixed, p and v trained) give a worse test "
        "accuracy and loss than training everything.",
        "authors' answers to reviewers",
        caveat=(
            "Measured on learning curves at equal budgets (two Adam step sizes). "
            "Asserted: trained embeddings end every budget with at most half the "
            "training loss, and the paper's 95% / 0.1 (trained E) and 72% / 0.6 "
            "(random fixed E) hold together, within their rounding, on the training "
            "split after a few hundred Adam steps of size 1e-3. Read as test figures "
            "(measured without assertion) the statement fails: no run of the trained "
            "model comes near 95% / 0.1 on the test split, where the two models end "
            "the budgets a few points apart."
        ),
    ),
    Claim(
        "C6b",
        "One step on E, then E frozen: the within-bin spread of E_s·v and E_s·p drops "
        "several-fold compared with training E to convergence.",
        "authors' answers to reviewers",
        caveat=(
            "Measured along training at equal budgets, with the average within-bin "
            "standard deviation read as a mean over tokens, a mean over bins, and "
            "scale-free (divided by the score's standard deviation). In the units of "
            "the scores the ratio falls with training length and passes the paper's "
            "1/8 (E_s·v) and 1/6 (E_s·p) early in training: the paper's reading, "
            "measured without assertion, holds at the end of every budget. Scale-free "
            "the spread is not several-fold smaller at any step past the first ten "
            "(asserted): the frozen model's scores are smaller, not more tightly "
            "binned."
        ),
    ),
    Claim(
        "C7a",
        "Two-layer model: E_s·v and E_s·W_KQ p behave as in the one-layer model.",
        "authors' answers to reviewers",
    ),
    Claim(
        "C7b",
        "An MLP after the softmax: E_s·p keeps growing with importance; the trend of "
        "E_s·v weakens.",
        "authors' answers to reviewers",
    ),
    Claim(
        "C7c",
        "K classes: one step gives E_s·v_k proportional to a per-class signed "
        "frequency; E_s·v_k grows with the importance of s for class k.",
        "authors' answers to reviewers",
    ),
    Claim(
        "C7d",
        "Small embedding dimension: how much of the picture survives at practical d.",
        "question of the reviewers, not answered with data",
        caveat=(
            "No statement of the paper to verify: the book reports its own "
            "measurements."
        ),
    ),
)

_IDS = {c.id.lower(): c for c in CLAIMS}


@dataclass
class ClaimRow:
    """A claim with the recorded checks that verify it."""

    claim: Claim
    checks: list[dict[str, Any]] = field(default_factory=list)

    @property
    def evidence(self) -> list[dict[str, Any]]:
        """The checks recorded as evidence for the claim (identities and controls are
        shown, but do not count toward its status)."""
        return [c for c in self.checks if c.get("role", "evidence") == "evidence"]

    @property
    def status(self) -> str:
        """``FAIL`` (an asserted check failed, whatever its role), ``NOT REPRODUCED``
        (every asserted check passed, but a statement of the paper measured without
        assertion, see :func:`attnbook.book.records.compare_with_paper`, did not hold),
        ``PASS (part)`` (everything held, but the checks cover only part of the claim),
        ``PASS``, or ``NOT CHECKED`` (no evidence recorded)."""
        if not self.checks:
            return "NOT CHECKED"
        if not all(c["passed"] for c in self.checks if c.get("asserted", True)):
            return "FAIL"
        if not self.evidence:
            return "NOT CHECKED"
        if not all(c["passed"] for c in self.evidence):
            return "NOT REPRODUCED"
        return "PASS (part)" if self.claim.partial else "PASS"


def _parts(parent: str) -> list[Claim]:
    return [
        c
        for c in CLAIMS
        if re.fullmatch(re.escape(parent.lower()) + r"[a-z]", c.id.lower())
    ]


def _row_id(tag: str | None) -> str | None:
    """The dashboard row of a check's ``claim`` tag: a claim id ("C6a"), a parent ("C6",
    when the chapter tags a check with the claim as a whole), or None (not a claim:
    "setup")."""
    if not tag:
        return None
    tag = tag.strip().lower()
    if tag in _IDS:
        return _IDS[tag].id
    parts = _parts(tag)
    return parts[0].id[:-1] if parts else None


def _combined(parent: str) -> Claim:
    parts = _parts(parent)
    caveats = " ".join(c.caveat for c in parts if c.caveat)
    sources = sorted({c.source for c in parts})
    return Claim(
        parent,
        " ".join(f"({c.id[-1]}) {c.statement}" for c in parts),
        "; ".join(sources),
        caveat=caveats,
        partial=any(c.partial for c in parts),
    )


def claim_rows(records: dict[str, dict]) -> list[ClaimRow]:
    """One row per claim of :data:`CLAIMS`, with the checks of ``records`` tagged with
    it.

    A check tagged with a claim that has parts as a whole ("C6" for C6a and C6b) goes to
    one combined row, which replaces the parts that have no check of their own. Checks
    are ordered by chapter, then in the order they ran.
    """
    by_id: dict[str, list[dict[str, Any]]] = {}
    for chapter in sorted(records):
        for chk in records[chapter]["checks"]:
            rid = _row_id(chk.get("claim"))
            if rid is not None:
                by_id.setdefault(rid, []).append({**chk, "chapter": chapter})
    rows: list[ClaimRow] = []
    done_parents: set[str] = set()
    for claim in CLAIMS:
        parent = claim.id[:-1] if claim.id[-1].isalpha() else None
        if parent and parent in by_id:
            if parent not in done_parents:
                done_parents.add(parent)
                rows.append(ClaimRow(_combined(parent), by_id[parent]))
            if claim.id in by_id:
                rows.append(ClaimRow(claim, by_id[claim.id]))
            continue
        rows.append(ClaimRow(claim, by_id.get(claim.id, [])))
    return rows


def other_checks(records: dict[str, dict]) -> dict[str, list[dict[str, Any]]]:
    """Recorded checks that belong to no claim row, grouped by their tag ("setup",
    "limits")."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for chapter in sorted(records):
        for chk in records[chapter]["checks"]:
            if _row_id(chk.get("claim")) is None:
                groups.setdefault(chk.get("claim") or "untagged", []).append(
                    {**chk, "chapter": chapter}
                )
    return groups


_START = re.compile(r"start_chapter\(\s*[\"']([^\"']+)[\"']\s*[,)]")


def chapter_name_in_notebook(notebook: dict) -> str | None:
    """The name a notebook passes to ``start_chapter`` (``None`` when it does not call
    it).

    Raises ``ValueError`` when it calls it more than once.
    """
    names = []
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        source = "".join(source) if isinstance(source, list) else source
        names += _START.findall(source)
    if len(names) > 1:
        raise ValueError(
            f"start_chapter is called {len(names)} times ({names}); call it once"
        )
    return names[0] if names else None


def required_chapters(notebooks: dict[str, dict]) -> dict[str, str]:
    """``{chapter name: docname}`` for every notebook (by docname) that calls
    start_chapter.

    Raises ``ValueError`` when a notebook's chapter name is not its file's stem (its
    record would be filed under another chapter's name).
    """
    required = {}
    for docname, nb in sorted(notebooks.items()):
        name = chapter_name_in_notebook(nb)
        if name is None:
            continue
        stem = docname.rsplit("/", 1)[-1]
        if name != stem:
            raise ValueError(
                f"{docname}: start_chapter({name!r}) must name the notebook's stem "
                f"{stem!r}"
            )
        required[name] = docname
    return required


_RESULT = re.compile(
    r"\{prf:(theorem|lemma|proposition|corollary|conjecture|property|observation|criterion)\}"
    r"[^\n]*\n(?:[ \t]*:[a-z]+:[^\n]*\n)*?[ \t]*:label:[ \t]*(\S+)"
)
_CHECK = re.compile(r"\bcheck\(\s*[\"']([^\"']+)[\"']")


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def _code_cell_results(
    notebook: dict,
) -> tuple[list[str | None], list[str], int | None]:
    """Per code cell: the last result label stated before it, its source, and the index
    of the code cell that calls start_chapter."""
    current: str | None = None
    labels: list[str | None] = []
    sources: list[str] = []
    start: int | None = None
    for cell in notebook.get("cells", []):
        text = _source(cell)
        if cell.get("cell_type") == "markdown":
            found = [m.group(2) for m in _RESULT.finditer(text)]
            if found:
                current = found[-1]
        elif cell.get("cell_type") == "code":
            if start is None and _START.search(text):
                start = len(labels)
            labels.append(current)
            sources.append(text)
    return labels, sources, start


def result_labels(notebook: dict) -> dict[str, str]:
    """``{check name: label}``: each check of a notebook belongs to the last result
    (theorem, lemma, proposition, corollary, conjecture ...) stated in the markdown
    cells before it.

    Only checks whose name is a string literal are found here; :func:`attach_results`
    also places checks by the cell they ran in.
    """
    labels, sources, _ = _code_cell_results(notebook)
    out: dict[str, str] = {}
    for label, text in zip(labels, sources):
        if label:
            for name in _CHECK.findall(text):
                out.setdefault(name, label)
    return out


def attach_results(records: dict[str, dict], notebooks: dict[str, dict]) -> None:
    """Fill in each recorded check's ``result`` label (in place) where it was not given.

    ``notebooks`` maps chapter names to notebook JSON. An explicit ``check(...,
    result=)`` is kept; otherwise the check gets the last result stated before the code
    cell it ran in (the record gives that cell as a count from ``start_chapter``'s
    cell), or, without the cell, before the cell that names it.
    """
    for chapter, record in records.items():
        nb = notebooks.get(chapter, {})
        labels, _, start = _code_cell_results(nb)
        by_name = result_labels(nb)
        for chk in record["checks"]:
            if chk.get("result"):
                continue
            cell = chk.get("cell")
            if (
                cell is not None
                and start is not None
                and 0 <= start + cell < len(labels)
            ):
                chk["result"] = labels[start + cell]
            elif chk["name"] in by_name:
                chk["result"] = by_name[chk["name"]]
