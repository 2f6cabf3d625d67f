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

from attnbook.book.notebooks import (
    attach_results,
    chapter_name_in_notebook,
    required_chapters,
    result_labels,
)

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
    "HEADLINES",
    "GROUPS",
    "check_group",
    "check_counts",
]


@dataclass(frozen=True)
class Claim:
    """One claim of the paper as the book states it."""

    id: str
    statement: str
    source: str
    caveat: str = ""  # what the book cannot verify as stated, or what it reconstructed
    verifiable: bool = True  # False: the paper states nothing to verify (C7d)
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
        "max-margin direction. Verified for d = 256 and 1024 when the random part of "
        "the relevant embeddings dominates their moved part (ratio r ≤ 1, every value "
        "tried, random p(0)), and in the small-initialization regime (r ≥ 2, up to "
        "r = 8; random, small or zero p(0)) when the value B = (η/2)|α*|‖v‖² that the "
        "step gives the relevant tokens clears the boundary B/B_c(T) + c/r > 1 (B_c(8) "
        "≈ 4.6, about 2 log T, from a two-token reduction; c ≈ 0.8 fitted). Below that "
        "boundary the flow abandons a whole class.",
        "paper, Theorem 4.3 with Lemmas 4.4, 4.5",
        caveat=(
            "Assumption 1 and the theorem's hypotheses are reconstructed from the "
            "abstract and the reviews; whether the paper's statement carries a "
            "condition on the step size is unknown. Runs below the boundary, with a "
            "positive value gap and a feasible max-margin problem, abandon a whole "
            "class: with the random part removed the flow reduces exactly to one "
            "coordinate, which gives up a class when B < B_c(T) (computed "
            "numerically), so a theorem in the limit σ → 0 needs "
            "a value condition of this kind (at the step η = 80 of the chapter's "
            "instances B ≈ 0.5, far below it). The boundary at finite r is the book's "
            "conjecture, checked on a grid of values and ratios with c fitted on one "
            "data family (T = 8, V = 100, n = 100); at d = 64 < V it does not hold."
        ),
        partial=True,
    ),
    Claim(
        "C4",
        "With several relevant tokens: (1, restated as the book's conjecture) when "
        "the random part of the relevant embeddings dominates their moved part "
        "(r ≤ 1), the flow keeps all attention on relevant tokens; (2) if the flow "
        "selects all relevant tokens of every sequence, its limit is their max-margin "
        "direction. Generically one relevant token per sequence is kept, and the "
        "limit is the max-margin direction of that selection.",
        "authors' answers to reviewers",
        caveat=(
            "Part (1) as the authors state it (a converging p selects a relevant "
            "token in every sequence) fails below the collapse boundary of C3 (a "
            "small value B of the relevant tokens while their moved part dominates): "
            "those runs satisfy Assumption 1 yet put a whole class's attention on "
            "irrelevant tokens; whether the authors' statement carries a condition on "
            "the step that excludes them is unknown. Part (1) is checked at r ≈ 0.5 "
            "only. Partially relevant tokens are open in the paper; the book's checks "
            "on them (partial_*) test its own prediction, not a statement of the "
            "paper."
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
        "Two-layer model: E_s·v and E_s·W_KQ p behave as in the one-layer model "
        "(E_s·v increases with importance; E_s·W_KQ p grows with its absolute value, "
        "on both sides of zero).",
        "authors' answers to reviewers",
        caveat=(
            "Tested against the importance measured on held-out reviews, in three "
            "initializations, raw and given log document frequency, each above a "
            "threshold taken from five models trained on shuffled labels. Measured "
            "on the short IMDB reviews (at most 80 distinct words, d = 32) in a "
            "memorising regime: the model fits its training labels, and shuffled "
            "ones, almost exactly (accuracies on the section's page)."
        ),
    ),
    Claim(
        "C7b",
        "An MLP after the softmax: E_s·p keeps growing with importance (a U, rising "
        "on both sides of zero); the trend of E_s·v weakens.",
        "authors' answers to reviewers",
        caveat=(
            "Tested against held-out importance in three initializations, above "
            "thresholds from five models trained on shuffled labels (10,000 IMDB "
            "reviews, d = 128; the authors used d = 2048). The U of E_s·p holds on "
            "both sides but is about half as strong as with a linear head; its raw "
            "both-arms correlation clears the threshold by less than 0.01 and is "
            "recorded, not asserted. E_s·v loses its trend: its sign changes across "
            "initializations."
        ),
    ),
    Claim(
        "C7c",
        "K classes: one step gives E_s·v_k proportional to a per-class signed "
        "frequency; E_s·v_k grows with the importance of s for class k.",
        "authors' answers to reviewers",
        caveat=(
            "The trained trend is tested against the per-class importance on held-out "
            "reviews, in three initializations, above thresholds from five models "
            "trained on shuffled classes, for every class of Yelp and IMDB. The Yelp "
            "test split is small: most of its tokens occur in too few held-out reviews "
            "and are left out of its statistics."
        ),
    ),
    Claim(
        "C7d",
        "Small embedding dimension: how much of the picture survives at practical d.",
        "question of the reviewers, not answered with data",
        verifiable=False,
        caveat=(
            "No statement of the paper to verify: the book reports its own "
            "measurements (held-out importance, three initializations at each d, "
            "thresholds from five models trained on shuffled labels at each d)."
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
        ``MEASURED`` (everything held, but the paper states nothing to verify: the
        checks are the book's own measurements), ``PASS (part)`` (everything held, but
        the checks cover only part of the claim), ``PASS``, or ``NOT CHECKED`` (no
        evidence recorded)."""
        if not self.checks:
            return "NOT CHECKED"
        if not all(c["passed"] for c in self.checks if c.get("asserted", True)):
            return "FAIL"
        if not self.evidence:
            return "NOT CHECKED"
        if not all(c["passed"] for c in self.evidence):
            return "NOT REPRODUCED"
        if not self.claim.verifiable:
            return "MEASURED"
        return "PASS (part)" if self.claim.partial else "PASS"

    @property
    def headline(self) -> dict[str, Any] | None:
        """The check that sums the claim up in one number: the one :data:`HEADLINES`
        names for the claim when it was recorded, else the first asserted evidence,
        else the first evidence (None without evidence)."""
        named = HEADLINES.get(self.claim.id)
        for chk in self.evidence:
            if chk["name"] == named:
                return chk
        asserted = [c for c in self.evidence if c.get("asserted", True)]
        return (asserted or self.evidence or [None])[0]

    def groups(self) -> dict[str, list[dict[str, Any]]]:
        """The checks by what they are for (:data:`GROUPS`, in that order; empty groups
        left out)."""
        out: dict[str, list[dict[str, Any]]] = {}
        for chk in self.checks:
            out.setdefault(check_group(chk), []).append(chk)
        return {g: out[g] for g in GROUPS if g in out}


#: The check each claim's row shows as its headline (a missing name falls back to the
#: first evidence; see :attr:`ClaimRow.headline`).
HEADLINES: dict[str, str] = {
    "C1": "imdb_pearson",
    "C2": "cls_pearson",
    "C3": "min_cosine",
    "C4": "c4_min_relevant_mass",
    "C5": "imdb_rho_value_lower",
    "C6a": "imdb_train_loss_ratio_random_full",
    "C7a": "two_layer_rho_v_low",
    "C7b": "mlp_rho_g_low",
    "C7c": "mc_min_low",
    "C7d": "small_d_min_low_v",
}

#: The groups of a claim's checks, in the order the dashboard lists them.
GROUPS: dict[str, str] = {
    "evidence": "Evidence (decides the status)",
    "measured": "Statements of the paper, measured without assertion",
    "identity": "Identities (two computations of one quantity agree)",
    "control": "Negative controls and sanity checks",
}


def check_group(chk: dict[str, Any]) -> str:
    """The group of :data:`GROUPS` a recorded check belongs to."""
    if not chk.get("asserted", True):
        return "measured"
    role = chk.get("role", "evidence")
    return role if role in GROUPS else "evidence"


def check_counts(checks: list[dict[str, Any]]) -> dict[str, int]:
    """How many of ``checks`` were asserted and passed, and how many statements of the
    paper were measured without assertion and held; the dashboard and the page
    *Reproducing this book* both count with this function, so they agree."""
    asserted = [c for c in checks if c.get("asserted", True)]
    measured = [c for c in checks if not c.get("asserted", True)]
    counts = {
        "asserted": len(asserted),
        "passed": sum(bool(c["passed"]) for c in asserted),
        "measured": len(measured),
        "held": sum(bool(c["passed"]) for c in measured),
    }
    for role in ("evidence", "identity", "control"):
        counts[role] = sum(check_group(c) == role for c in asserted)
    return counts


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
