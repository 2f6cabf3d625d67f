"""A claim's controls in the book: its checks and its figure.

- :func:`check_trend` -- assert that the smallest value of a statistic over the
  real-label initialisations clears the threshold taken from the shuffled-label
  control (:class:`attnbook.experiments.controls.ControlledTrend`);
- :func:`check_initial` -- assert, as a control, that the statistics of the untrained
  initial embeddings are at chance;
- :func:`trend_checks` -- :func:`check_trend` with the claim, result and reading set
  once for a block, so that each check is one line;
- :func:`plot_controls` -- each statistic with the real labels (one dot per
  initialisation) beside the shuffled-label control (one dot per permutation), the
  initial embeddings and the threshold; :func:`controls_figure` draws it as a figure;
- :func:`binned_panels` -- bin means of scores against the importance, one line per
  initialisation, class or model.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from attnbook.book.checks import check, compare_with_paper
from attnbook.book.plotting import PALETTE, ROW_HEIGHT_IN, panel_grid, plot_binned
from attnbook.book.records import glue
from attnbook.experiments.controls import ControlledTrend
from attnbook.experiments.seeded_runs import Run

__all__ = [
    "check_trend",
    "check_initial",
    "trend_checks",
    "plot_controls",
    "controls_figure",
    "binned_panels",
    "seed_series",
]

#: The words of the control that the initial embeddings are at chance.
INITIAL_WHAT = (
    "largest |ρ| of the initial embeddings in standard errors √(2/n) (at most 5)"
)

_KINDS = {
    "labels": ("real labels", PALETTE["positive"], "o"),
    "shuffled": ("shuffled labels", PALETTE["negative"], "X"),
    "initial": ("initial embeddings", PALETTE["neutral"], "s"),
}


def plot_controls(
    ax, trends: Mapping[str, ControlledTrend], statistic: str = "heldout_partial"
) -> None:
    """Draw on ``ax`` one row per entry of ``trends`` (top to bottom): the
    ``statistic`` of every run as a dot (real labels, shuffled labels, initial
    embeddings, slightly apart vertically) and the threshold as a vertical bar."""
    names = list(trends)
    for row, name in enumerate(names):
        y = len(names) - 1 - row
        tr = trends[name]
        for offset, (kind, (label, color, marker)) in zip(
            (0.18, 0.0, -0.18), _KINDS.items()
        ):
            values = tr.values(kind, statistic)
            ax.scatter(
                values,
                np.full(values.size, y + offset),
                color=color,
                marker=marker,
                s=28,
                alpha=0.85,
                linewidth=0,
                label=label if row == 0 else None,
                zorder=3,
            )
        ax.plot(
            [tr.thresholds[statistic]] * 2,
            [y - 0.32, y + 0.32],
            color=PALETTE["theory"],
            lw=2,
            label="threshold" if row == 0 else None,
        )
    ax.axvline(0, color="0.7", lw=0.8, zorder=0)
    ax.set_yticks(range(len(names)), names[::-1])
    ax.set_ylim(-0.6, len(names) - 0.4)


def controls_figure(
    trends: Mapping[str, ControlledTrend],
    row_height: float,
    statistic: str = "heldout_partial",
):
    """:func:`plot_controls` of ``statistic`` (the partial rank correlation given the
    log document frequency, held-out importance) as a figure of one panel
    ``row_height`` inches high, with the legend below it."""
    fig, (ax,) = panel_grid(1, row_height=row_height, layout="constrained")
    plot_controls(ax, trends, statistic)
    ax.set(xlabel="partial ρ given log document frequency (held-out importance)")
    fig.legend(loc="outside lower center", ncols=4)
    return fig


def check_trend(
    name: str,
    trend: ControlledTrend,
    statistic: str,
    *,
    claim: str,
    what: str,
    result: str | None = None,
    reading: str = "paper",
    asserted: bool = True,
    spread: float | None = None,
) -> float:
    """Check that the smallest value of ``statistic`` over the real-label runs of
    ``trend`` is at least the threshold taken from its shuffled-label control; glue
    the largest value as ``name + "_high"`` and the threshold as ``name +
    "_threshold"``. Returns the smallest value. ``asserted=False`` records the
    comparison without asserting it (:func:`attnbook.book.checks.compare_with_paper`:
    for a statistic whose margin is within its platform-to-platform rounding);
    ``spread`` is recorded with the check (:func:`attnbook.book.checks.check`)."""
    values = trend.values("labels", statistic)
    threshold = trend.thresholds[statistic]
    glue(f"{name}_high", float(values.max()))
    glue(f"{name}_threshold", float(threshold))
    smallest = float(values.min())
    record = check if asserted else compare_with_paper
    record(
        name,
        smallest,
        threshold,
        ">=",
        claim=claim,
        result=result,
        what=what,
        reading=reading,
        spread=spread,
    )
    return smallest


def check_initial(
    name: str,
    trends: Mapping[str, ControlledTrend],
    *,
    claim: str,
    what: str = INITIAL_WHAT,
    result: str | None = None,
) -> float:
    """Control: every thresholded statistic of the untrained initial embeddings is at
    chance. The value is the largest ``|rho| sqrt(n / 2)`` over ``trends``, with ``n``
    the number of held-out tokens: a rank correlation between unrelated quantities over
    ``m`` tokens has standard deviation about ``1 / sqrt(m)``, and an arm of the U uses
    about half the tokens, so this is at most the number of standard errors. It must
    be at most 5 (a two-sided chance of about 6e-7 per statistic)."""
    z = max(
        float(np.abs(tr.values("initial", stat)).max())
        * float(np.sqrt(tr.n_tokens["heldout"] / 2))
        for tr in trends.values()
        for stat in tr.thresholds
    )
    return check(
        name, z, 5.0, "<=", claim=claim, result=result, role="control", what=what
    )


def trend_checks(
    trends: Mapping[str, ControlledTrend],
    *,
    claim: str,
    result: str | None = None,
    reading: str = "paper",
    what: Mapping[str, str] | None = None,
    seed_spread: bool = False,
):
    """:func:`check_trend` with the claim, result and reading set once for a block of
    checks on ``trends``, so that each check is one line::

        c7 = trend_checks(trends, claim="C7a", result="conj-x", what=words)
        c7("rho_v_low", "E_s·v against I", "heldout")

    ``what`` maps a check's name to its description in words; a call may override any
    shared keyword, or pass ``asserted=False``. With ``seed_spread``, each check
    records as its spread the range of its statistic over the real-label
    initialisations (:meth:`ControlledTrend.seed_range`) unless the call passes one."""
    shared = dict(claim=claim, result=result, reading=reading)
    described = dict(what or {})

    def block_check(name: str, trend: str, statistic: str, **keywords) -> float:
        keywords.setdefault("what", described.get(name))
        if seed_spread:
            keywords.setdefault("spread", trends[trend].seed_range(statistic))
        return check_trend(name, trends[trend], statistic, **{**shared, **keywords})

    return block_check


#: One series of :func:`binned_panels`: ``(importance, score, colour)``.
Series = tuple[np.ndarray, np.ndarray, str]


def seed_series(
    importance: np.ndarray,
    runs: Sequence[Run],
    score: str,
    colors: Sequence[str],
    *,
    label: str = "seed {seed}",
    shuffled: str | None = None,
) -> dict[str, Series]:
    """Series of :func:`binned_panels` for the score ``score`` of every real-label run
    (``label`` formatted with its seed, one colour of ``colors`` each) and, when
    ``shuffled`` names a colour, of the first shuffled-label run."""
    real = [r for r in runs if r.kind == "labels"]
    series = {
        label.format(seed=r.seed): (importance, r.scores[score], color)
        for r, color in zip(real, colors)
    }
    if shuffled is not None:
        first = next(r for r in runs if r.kind == "shuffled")
        series["shuffled labels"] = (importance, first.scores[score], shuffled)
    return series


def binned_panels(
    panels: Sequence[tuple[str, str, Mapping[str, Series]]],
    *,
    xlabel: str = "held-out importance $I(s)$",
    legends: Sequence[str] = ("upper left", "upper center"),
    row_height: float = ROW_HEIGHT_IN,
    scaled: bool = False,
    min_count: int = 20,
    axes=None,
):
    """One panel per ``(title, ylabel, series)`` of ``panels``: every ``label ->
    (importance, score, colour)`` of ``series`` drawn as the line of its bin means
    (bins with fewer than ``min_count`` tokens left out), the score divided by its
    standard deviation over the tokens when ``scaled``; each panel's legend at the
    place ``legends`` names (``""``: none). Draws on ``axes`` when given, else on a new
    :func:`panel_grid` of rows ``row_height`` inches high. Returns the figure."""
    if axes is None:
        fig, axes = panel_grid(len(panels), row_height=row_height)
    else:
        fig = axes[0].figure
    legends = [*legends, *[""] * len(panels)]
    for ax, (title, ylabel, series), where in zip(axes, panels, legends):
        for label, (importance, score, color) in series.items():
            shown = score / score.std() if scaled else score
            plot_binned(
                ax,
                importance,
                shown,
                label=label,
                color=color,
                band=False,
                min_count=min_count,
            )
        ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
        if where:
            ax.legend(loc=where)
    return fig
