"""The sections of chapter 4 (4.8 to 4.10) train "the model of chapter 4" again, each in
its own kernel, with its run settings written in its own first code cell. They must be
chapter 4's: a setting changed there and not in a section would make the section's
prose about "the same model" false without any check failing."""

from __future__ import annotations

import ast
import json

from conftest import ROOT

CHAPTER = "04_real_data"
SECTIONS = ("04a_paper_protocol", "04b_u_origin", "04c_synthetic")


def settings(chapter: str) -> dict[str, object]:
    """The names bound to literals in the chapter's code cell that starts it."""
    nb = json.loads((ROOT / "chapters" / f"{chapter}.ipynb").read_text())
    (cell,) = [
        "".join(c["source"])
        for c in nb["cells"]
        if c["cell_type"] == "code" and "start_chapter(" in "".join(c["source"])
    ]
    found = {}
    for node in ast.parse(cell).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target, value = node.targets[0], node.value
        pairs = (
            zip(target.elts, value.elts)
            if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple)
            else [(target, value)]
        )
        for name, expr in pairs:
            try:
                found[name.id] = ast.literal_eval(expr)
            except (ValueError, AttributeError):  # not a literal, or not a name
                continue
    return found


def test_the_sections_of_chapter_4_train_its_model():
    base = settings(CHAPTER)
    assert {"DIM", "SIGMA", "SEEDS", "ADAM_LR", "STEPS", "PAPER_VOCAB"} <= set(base)
    for section in SECTIONS:
        own = settings(section)
        for name in ("DIM", "SIGMA", "ADAM_LR", "STEPS", "PAPER_VOCAB", "YELP_SEED"):
            if name in own:
                assert own[name] == base[name], (section, name)
        # a section may train the first seeds only, never other ones
        assert own["SEEDS"] == base["SEEDS"][: len(own["SEEDS"])], section
        if "IMDB_VOCAB" in own:
            assert own["IMDB_VOCAB"] == base["PAPER_VOCAB"]["imdb"], section
