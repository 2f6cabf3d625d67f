"""The book's figure style, tables, and the dashboard's statuses, groups and counts."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from docutils import nodes  # noqa: E402

from _ext.dashboard import (  # noqa: E402
    CLAIMS,
    ClaimRow,
    attach_results,
    check_counts,
    check_group,
)
from _ext.pages import latex_number, math_text  # noqa: E402
from attnbook.book import plotting  # noqa: E402
from attnbook.book.tables import readable_table  # noqa: E402

from conftest import check_record  # noqa: E402


def _chk(name, passed=True, asserted=True, role="evidence", claim="C1"):
    return check_record(
        name,
        passed=passed,
        asserted=asserted,
        role=role,
        claim=claim,
        chapter="02_one_step",
    )


@pytest.fixture(autouse=True)
def _style():
    plotting.setup()
    yield
    plt.close("all")


# ------------------------------------------------------------------------ the figures
def test_panel_grid_never_three_in_a_row():
    for n, shape in ((1, (1, 1)), (2, (1, 2)), (3, (2, 2)), (4, (2, 2)), (5, (3, 2))):
        fig, axes = plotting.panel_grid(n)
        assert len(axes) == n and len(fig.axes) == n
        width, height = fig.get_size_inches()
        assert width == pytest.approx(plotting.COLUMN_WIDTH_IN)
        assert height == pytest.approx(plotting.ROW_HEIGHT_IN * shape[0])
    fig, axes = plotting.panel_grid(3, one_column=True)
    assert fig.get_size_inches()[1] == pytest.approx(3 * plotting.ROW_HEIGHT_IN)
    with pytest.raises(ValueError, match="n_panels"):
        plotting.panel_grid(0)


def test_audit_finds_what_does_not_read():
    fig, (ax,) = plotting.panel_grid(1)
    ax.plot([0, 1], [0, 1])
    ax.plot([0, 1], [1, 0])
    ax.axhline(0.5)  # a reference line is not a series
    assert any("no legend" in p for p in plotting.audit(fig))
    ax.legend(["a", "b"])
    assert plotting.audit(fig) == []
    ax.set_title("tiny", fontsize=6)
    assert any("smaller than" in p for p in plotting.audit(fig))
    plotting.fit_to_column(fig)
    assert plotting.audit(fig) == []


def test_audit_finds_overlapping_ticks():
    fig, (ax,) = plotting.panel_grid(1, row_height=2.5)
    ax.plot([1, 2], [1e-8, 1e8])
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(numticks=40))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.LogFormatterSciNotation())
    assert any("overlapping tick labels" in p for p in plotting.audit(fig))
    # a few labelled decades and no labels on the minor ticks: nothing overlaps
    ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(numticks=4))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    assert not any("overlapping" in p for p in plotting.audit(fig))


def _two_rows(layout_engine: bool):
    fig, axes = plt.subplots(2, 2, figsize=(9.0, 6.8))
    for ax in axes.ravel():
        ax.plot([0, 1], [0, 1])
        ax.set_title("IMDB: value score $E_s \\cdot v$", fontsize=11.5)
        ax.set_xlabel("importance $P(1 \\mid s) - P(0 \\mid s)$")
    if layout_engine:
        fig.set_layout_engine("tight", rect=(0, 0.06, 1, 1))
    else:
        fig.tight_layout(rect=(0, 0.06, 1, 1))
    return fig


def test_audit_finds_a_label_over_the_next_rows_title():
    """Laid out once at 9 inches, then shrunk to the column, a row's x label runs into
    the title below it; a figure laid out again when drawn does not."""
    fig = _two_rows(layout_engine=False)
    plotting.fit_to_column(fig)
    assert any("overlapping labels" in p for p in plotting.audit(fig))
    fig = _two_rows(layout_engine=True)
    plotting.fit_to_column(fig)
    assert plotting.audit(fig) == []


def test_show_fits_wide_figures_and_refuses_unreadable_ones():
    fig, axes = plt.subplots(1, 2, figsize=(14, 4))
    for ax in axes:
        ax.plot([0, 1], [0, 1], label="x")
        ax.legend(fontsize=6)
    plotting.show(fig)
    assert fig.get_size_inches()[0] == pytest.approx(plotting.COLUMN_WIDTH_IN)
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    ax.plot([0, 1], [1, 0])
    with pytest.raises(ValueError, match="no legend"):
        plotting.show(fig)
    with pytest.warns(UserWarning, match="no legend"):
        fig, ax = plt.subplots()
        ax.plot([0, 1], [0, 1])
        ax.plot([0, 1], [1, 0])
        plotting.show(fig, strict=False)


# ------------------------------------------------------------------------- the tables
def test_readable_table_names_and_integer_formats():
    frame = pd.DataFrame({"n": [7762, 12], "rate": [0.123456, 1.5], "c": [3.0, 4.0]})
    html = readable_table(
        frame, {"n": "tokens", "c": "count"}, digits={"rate": 2}, integers=["count"]
    ).to_html()
    assert "tokens" in html and "7,762" in html and "0.12" in html
    assert ">3<" in html and "7762.000000" not in html
    with pytest.raises(TypeError, match="frame"):
        readable_table([1, 2])
    with pytest.raises(ValueError, match="integers"):
        readable_table(frame, integers=["missing"])


# ---------------------------------------------------------------------- the dashboard
def test_status_measured_when_the_paper_states_nothing():
    c7d = next(c for c in CLAIMS if c.id == "C7d")
    assert ClaimRow(c7d, [_chk("a", claim="C7d")]).status == "MEASURED"
    c1 = CLAIMS[0]
    assert ClaimRow(c1, [_chk("a")]).status == "PASS"
    # identities and controls do not count toward the status
    assert ClaimRow(c1, [_chk("i", role="identity")]).status == "NOT CHECKED"
    assert ClaimRow(c1, [_chk("c", role="control", passed=False)]).status == "FAIL"
    row = ClaimRow(c1, [_chk("a"), _chk("m", passed=False, asserted=False)])
    assert row.status == "NOT REPRODUCED"


def test_headline_groups_and_counts():
    checks = [
        _chk("ctl", role="control"),
        _chk("idn", role="identity"),
        _chk("ev1"),
        _chk("imdb_pearson"),
        _chk("m", passed=False, asserted=False),
    ]
    row = ClaimRow(CLAIMS[0], checks)
    assert row.headline["name"] == "m"  # under NOT REPRODUCED: what did not hold
    assert ClaimRow(CLAIMS[0], checks[:4]).headline["name"] == "imdb_pearson"  # named
    assert ClaimRow(CLAIMS[0], checks[:3]).headline["name"] == "ev1"
    assert ClaimRow(CLAIMS[0], checks[:2]).headline is None
    assert list(row.groups()) == ["evidence", "measured", "identity", "control"]
    assert [check_group(c) for c in checks] == [
        "control",
        "identity",
        "evidence",
        "evidence",
        "measured",
    ]
    counts = check_counts(checks)
    assert counts == {
        "asserted": 4,
        "passed": 4,
        "measured": 1,
        "held": 0,
        "evidence": 2,
        "identity": 1,
        "control": 1,
    }


def test_checks_know_their_notebook_cell():
    nb = {
        "cells": [
            {"cell_type": "markdown", "source": "# t"},
            {"cell_type": "code", "source": "install()"},
            {"cell_type": "code", "source": "rng, device = start_chapter('a', seed=1)"},
            {"cell_type": "markdown", "source": "text"},
            {"cell_type": "code", "source": "check('x', 1, 0)"},
        ]
    }
    records = {"a": {"checks": [{"name": "x", "cell": 1}, {"name": "y"}]}}
    attach_results(records, {"a": nb})
    assert records["a"]["checks"][0]["nb_cell"] == 4
    assert "nb_cell" not in records["a"]["checks"][1]


def test_math_in_words_and_numbers():
    parts = math_text(r"Pearson $r$ of $\E_s\cdot\bv$ (IMDB)")
    assert [type(p) for p in parts] == [
        nodes.Text,
        nodes.math,
        nodes.Text,
        nodes.math,
        nodes.Text,
    ]
    assert parts[3].astext() == r"\E_s\cdot\bv"
    assert latex_number(0.99734) == "0.9973"
    assert latex_number(3.1e-13) == r"3.1 \times 10^{-13}"
    assert latex_number(0) == "0"


def test_bibliography_labels_are_author_year():
    from pybtex.database import parse_string
    from pybtex.plugin import find_plugin

    from _ext import bibstyle

    bibstyle.register()
    bib = parse_string(
        "@article{a, author={Wu, D. and Oymak, S. and Mondelli, M.}, title={T}, "
        "journal={J}, year={2025}}\n"
        "@article{b, author={Maas, A. and Daly, R.}, title={U}, journal={J}, "
        "year={2011}}\n"
        "@article{c, author={Tarzanagh, D. and Li, Y. and Oymak, S.}, title={V}, "
        "journal={J}, year={2023}}\n"
        "@article{d, author={Tarzanagh, D. and Li, Y. and Zhang, X.}, title={W}, "
        "journal={J}, year={2023}}\n",
        "bibtex",
    )
    style = find_plugin("pybtex.style.formatting", bibstyle.STYLE)()
    labels = [e.label for e in style.format_entries(bib.entries.values())]
    assert labels == [
        "Maas and Daly, 2011",
        "Tarzanagh et al., 2023a",
        "Tarzanagh et al., 2023b",
        "Wu et al., 2025",
    ]


def test_figures_are_fitted_to_the_column_when_displayed():
    """Inside IPython, every displayed figure comes out at the column width, at twice
    the screen resolution, with fonts of at least the minimum size."""
    import subprocess
    import sys

    script = (
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "shell = InteractiveShell.instance()\n"
        "import matplotlib\n"
        "matplotlib.use('module://matplotlib_inline.backend_inline')\n"
        "from attnbook.book import plotting\n"
        "plotting.setup()\n"
        "import matplotlib.pyplot as plt\n"
        "fig, axes = plt.subplots(1, 3, figsize=(15, 4))\n"
        "for ax in axes:\n"
        "    ax.plot([0, 1], [0, 1], label='a')\n"
        "    ax.legend(fontsize=6)\n"
        "data, md = shell.display_formatter.format(fig)\n"
        "size = axes[0].get_legend().get_texts()[0].get_fontsize()\n"
        "print(md['image/png']['width'], fig.get_size_inches()[0], size)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout.split()
    width_px, width_in, font = int(out[0]), float(out[1]), float(out[2])
    assert width_in == pytest.approx(plotting.COLUMN_WIDTH_IN)
    assert width_px <= plotting.COLUMN_WIDTH_IN * plotting.SCREEN_DPI
    assert font >= plotting.MIN_FONT_PT


# ---------------------------------------------------------------- figures described
def test_a_figure_is_described_by_its_caption():
    """Every image of a figure takes the caption, its math in plain characters, as its
    alternative text; an image's own alternative text stays."""
    from _ext.page_assets import describe_figures, plain_tex

    assert plain_tex(r"\boldsymbol{E}_s\cdot\boldsymbol{v}") == "E_s·v"
    assert plain_tex(r"\frac{\eta}{2}\alpha_s\lVert\bv\rVert^2") == "(η)/(2)α_s‖v‖^2"
    doc = nodes.document(None, None)
    figure = nodes.figure()
    figure += nodes.image(uri="_images/3f2a.png")
    caption = nodes.caption()
    caption += nodes.Text("Value score ")
    caption += nodes.math(text=r"\E_s \cdot \bv")
    caption += nodes.Text(" against the prediction.")
    figure += caption
    own = nodes.figure()
    own += nodes.image(uri="_images/b.png", alt="its own words")
    own += nodes.caption(text="A caption.")
    doc += [figure, own]
    describe_figures(None, doc, "page")
    alts = [image["alt"] for image in doc.findall(nodes.image)]
    assert alts == ["Value score E_s · v against the prediction.", "its own words"]
