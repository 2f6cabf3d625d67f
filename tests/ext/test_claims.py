"""The claims as data (chapters/claims.yml, read by _ext.claims.load_claims): the book's
file loads, and a malformed entry stops with the file and the claim named."""

from __future__ import annotations

from pathlib import Path

import pytest

from _ext.claims import CLAIMS, CLAIMS_FILE, ClaimsError, load_claims

_GOOD = """claims:
  - id: C1
    statement: A claim.
    source: paper, Lemma 1
    headline: stat
  - id: C2
    statement: Another.
    source: reviews
    partial: true
    caveat: Part only.
    readings:
      - statement: The book's reading.
        checks: 'book_\\w+'
        headline: book_one
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "claims.yml"
    path.write_text(text)
    return path


def test_the_books_claims_load_in_order():
    claims, headlines = load_claims(CLAIMS_FILE)
    assert claims == CLAIMS
    assert [c.id for c in claims][:2] == ["C1", "C2"]
    assert claims[-1].id == "C7d" and not claims[-1].verifiable
    assert set(headlines) == {c.id for c in claims}


def test_a_well_formed_file(tmp_path):
    claims, headlines = load_claims(_write(tmp_path, _GOOD))
    assert [c.id for c in claims] == ["C1", "C2"]
    assert headlines == {"C1": "stat"}
    assert claims[1].partial and claims[1].caveat == "Part only."
    assert claims[1].readings[0].checks == "book_\\w+"
    assert claims[1].readings[0].headline == "book_one"


@pytest.mark.parametrize(
    "edit, message",
    [
        (("    source: reviews\n", ""), "claim C2: the field 'source' is missing"),
        (("partial: true", "partial: yes please"), "claim C2: 'partial' must be"),
        (("    caveat:", "    cavaet:"), "claim C2: unknown field(s) cavaet"),
        (("id: C2", "id: C1"), "claim C1: the id is given twice"),
        (("id: C2", "id: claim two"), "claim claim two: an id is C<number>"),
        (("  - id: C2\n", "  - \n"), "claim 2 (no id): the field 'id' is missing"),
        (("'book_\\w+'", "'book_(\\w+'"), "claim C2, reading 1: 'checks' is not"),
        (("statement: Another.", "statement: ''"), "claim C2: 'statement' must be"),
    ],
)
def test_a_malformed_entry_names_its_claim(tmp_path, edit, message):
    path = _write(tmp_path, _GOOD.replace(*edit))
    with pytest.raises(ClaimsError) as err:
        load_claims(path)
    assert f"{path}, {message}" in str(err.value)


def test_a_file_without_claims(tmp_path):
    with pytest.raises(ClaimsError, match="expected 'claims:'"):
        load_claims(_write(tmp_path, "title: no claims\n"))
    with pytest.raises(ClaimsError, match="cannot read the claims"):
        load_claims(_write(tmp_path, "claims: [\n"))
