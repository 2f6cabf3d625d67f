"""The runs, tables and figures of the section on the paper's protocol (its notebook
imports this file from beside itself): learning curves at equal budgets, where the
paper's numbers fall on them, the spread ratio and the picture along training."""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import product
from operator import itemgetter
from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from matplotlib.lines import Line2D

from attnbook.book.plotting import PALETTE
from attnbook.data.corpus import ReviewCorpus
from attnbook.experiments.curves import (
    ABLATIONS,
    SPREAD_READINGS,
    Curve,
    Dynamics,
    ablation_curves,
    first_step_reaching,
    log_steps,
    spread_curves,
    train_curve,
)
from attnbook.experiments.importance import observed_range, token_statistics
from attnbook.experiments.picture import MAIN_STATISTICS
from attnbook.experiments.real_data import one_step_eta, starting_points
from attnbook.experiments.robustness import PICTURE_STATISTICS
from attnbook.experiments.spreads import spread_over

#: The paper's accuracy and loss by model (key of ``ABLATIONS``).
PAPER_ACCURACY_LOSS = {
    "full": {"accuracy": 0.95, "loss": 0.1},
    "random_E": {"accuracy": 0.72, "loss": 0.6},
}
#: Half a unit of the paper's last digit (whole percents, tenths of a loss).
PAPER_ROUNDING = {"accuracy": 0.005, "loss": 0.05}
#: The paper's spread ratio (one step then frozen ``E`` over full training), by score.
PAPER_SPREAD_RATIO = {"E.v": 1 / 8, "E.p": 1 / 6}
_MODELS = {m: ABLATIONS[m][0] for m in PAPER_ACCURACY_LOSS}
_NORM1, _UNIT = "rows of norm 1", "N(0, 1) entries"
METRICS = ("accuracy", "loss")


@dataclass
class ProtocolRuns:
    """``curves[(corpus, model, label, seed)]``; ``unit_entries[(corpus, label)]``:
    random fixed ``E`` with ``N(0, 1)`` entries; ``autograd[(corpus, label)]``:
    trained ``E`` per seed with the autograd step."""

    curves: dict[tuple[str, str, str, int], Curve]
    unit_entries: dict[tuple[str, str], Curve]
    importance: dict[str, np.ndarray]
    doc_freq: dict[str, np.ndarray]
    seeds: tuple[int, ...]
    autograd: dict[tuple[str, str], list[Curve]] = field(default_factory=dict)

    def at(self, name: str, seed: int | None = None) -> dict[tuple[str, str], Curve]:
        """One corpus's curves on ``seed`` (default: the first), by (model, label)."""
        seed = self.seeds[0] if seed is None else seed
        return {
            (m, lab): c
            for (n, m, lab, s), c in self.curves.items()
            if n == name and s == seed
        }

    def over_seeds(self, name: str, model: str, label: str) -> list[Curve]:
        """One corpus, model and label's curves, one per seed."""
        return [self.curves[(name, model, label, s)] for s in self.seeds]


def protocol_runs(
    corpora: Mapping[str, ReviewCorpus],
    runs: Mapping[str, tuple[float, int]],
    seeds: tuple[int, ...],
    *,
    dim: int,
    sigma: float,
    device: torch.device | str | None = None,
    autograd: tuple[tuple[str, str], ...] = (),
) -> ProtocolRuns:
    """Adam curves for every ``label -> (step size, budget)``: the three models on the
    first seed, trained and random fixed ``E`` on the others; random fixed ``E`` with
    ``N(0, 1)`` entries on the first; trained ``E`` by autograd on ``autograd``."""
    out = ProtocolRuns({}, {}, {}, {}, seeds)
    for name, corpus in corpora.items():
        out.importance[name], alpha, out.doc_freq[name] = token_statistics(corpus)
        eta = one_step_eta(alpha, dim, sigma)
        for seed in seeds:
            gen = torch.Generator().manual_seed(seed)
            points = starting_points(
                corpus, dim=dim, sigma=sigma, eta=eta, generator=gen, device=device
            )
            models = tuple(ABLATIONS) if seed == seeds[0] else ("full", "random_E")
            for label, (lr, budget) in runs.items():
                steps, adam = log_steps(budget, 5), Dynamics.adam(lr)
                got = ablation_curves(
                    corpus, points, {label: adam}, steps, models=models
                )
                out.curves.update({(name, *key, seed): c for key, c in got.items()})
                if (name, label) in autograd:
                    out.autograd.setdefault((name, label), []).append(
                        train_curve(
                            points.init,
                            corpus,
                            trainable=("E", "p", "v"),
                            dynamics=adam,
                            eval_steps=steps,
                            splits=("train",),
                            fused=False,
                        )
                    )
                if seed == seeds[0]:
                    E = points.random_E["E"] * np.sqrt(dim)
                    out.unit_entries[(name, label)] = train_curve(
                        {**points.random_E, "E": E},
                        corpus,
                        trainable=("p", "v"),
                        dynamics=adam,
                        eval_steps=steps,
                    )
    return out


# ------------------------------------------------------------ accuracy and loss (C6a)
def paper_number_table(
    curves: Mapping[tuple[str, str], Curve], splits: tuple[str, ...] = ("train", "test")
) -> pd.DataFrame:
    """Per (dynamics label, model with a paper number, split): accuracy and loss at the
    end, the best of each, and the first step at the paper's (``NaN``: never)."""
    rows = []
    for (model, label), curve in curves.items():
        if model not in PAPER_ACCURACY_LOSS:
            continue
        paper = PAPER_ACCURACY_LOSS[model]
        for split in splits:
            acc, loss = f"{split}_accuracy", f"{split}_loss"
            reach_acc = first_step_reaching(curve, acc, paper["accuracy"], below=False)
            reach_loss = first_step_reaching(curve, loss, paper["loss"], below=True)
            rows.append(
                {
                    "dynamics": label,
                    "model": _MODELS[model],
                    "split": split,
                    "paper acc.": paper["accuracy"],
                    "paper loss": paper["loss"],
                    "acc. (end)": curve.metrics[acc][-1],
                    "loss (end)": curve.metrics[loss][-1],
                    "best acc.": max(curve.metrics[acc]),
                    "lowest loss": min(curve.metrics[loss]),
                    "step: paper acc.": np.nan if reach_acc is None else reach_acc,
                    "step: paper loss": np.nan if reach_loss is None else reach_loss,
                }
            )
    return pd.DataFrame(rows).set_index(["dynamics", "model", "split"])


def window_steps(
    curve: Curve, model: str, split: str, rounding: Mapping[str, float] = PAPER_ROUNDING
) -> list[int]:
    """The steps at which accuracy and loss on ``split`` both lie within ``rounding``
    of the paper's numbers for ``model``."""
    paper = PAPER_ACCURACY_LOSS[model]
    acc, loss = curve.metrics[f"{split}_accuracy"], curve.metrics[f"{split}_loss"]
    return [
        step
        for step, a, ell in zip(curve.steps, acc, loss)
        if abs(a - paper["accuracy"]) <= rounding["accuracy"]
        and abs(ell - paper["loss"]) <= rounding["loss"]
    ]


def matching_steps(
    curves: Mapping[tuple[str, str], Curve],
    label: str,
    split: str,
    *,
    accuracy_tol: float = PAPER_ROUNDING["accuracy"],
    loss_tol: float = PAPER_ROUNDING["loss"],
) -> list[int]:
    """The steps at which both models are in their :func:`window_steps` on ``split``
    under the dynamics ``label``."""
    rounding = {"accuracy": accuracy_tol, "loss": loss_tol}
    both = set(window_steps(curves[("random_E", label)], "random_E", split, rounding))
    full = window_steps(curves[("full", label)], "full", split, rounding)
    return [s for s in full if s in both]


def _text(steps: Sequence[int]) -> str:
    return ", ".join(map(str, steps)) or "none"


def match_table(
    runs: ProtocolRuns, names: Mapping[str, str], tags: Mapping[str, str]
) -> tuple[pd.DataFrame, dict[str, int]]:
    """Per corpus, label, split and seed: the steps at which each model, and both, are
    at the paper's numbers; how many with both, by ``<corpus>_<tag>_<split>_match``."""
    rows, counts = {}, {}
    columns = ("trained E at 95% / 0.1", "random fixed E at 72% / 0.6", "both")
    for name in names:
        for label, tag in tags.items():
            for split in ("train", "test"):
                counts[f"{name}_{tag}_{split}_match"] = 0
                for seed in runs.seeds:
                    sub = runs.at(name, seed)
                    full = window_steps(sub[("full", label)], "full", split)
                    rand = window_steps(sub[("random_E", label)], "random_E", split)
                    both = [s for s in full if s in rand]
                    counts[f"{name}_{tag}_{split}_match"] += len(both)
                    steps = (full, rand, both)
                    rows[(names[name], label, split, seed)] = {
                        c: _text(s) for c, s in zip(columns, steps)
                    }
    frame = pd.DataFrame(rows).T.rename_axis(["data", "dynamics", "split", "seed"])
    return frame, counts


def evaluations(
    curve: Curve, model: str, split: str, label: str, key: tuple[str, int]
) -> list[dict[str, object]]:
    """Every evaluation on ``split`` as a row: ``label``, ``key`` (scale of ``E``,
    seed), step, accuracy and loss with their offsets from the paper's for ``model``,
    and ``dist.``, the larger offset in units of the rounding."""
    paper, acc = PAPER_ACCURACY_LOSS[model], curve.metrics[f"{split}_accuracy"]
    return [
        {
            "step size": label,
            "E": key[0],
            "seed": key[1],
            "step": step,
            "acc.": a,
            "Δ acc.": a - paper["accuracy"],
            "loss": ell,
            "Δ loss": ell - paper["loss"],
            "dist.": max(
                abs(a - paper["accuracy"]) / PAPER_ROUNDING["accuracy"],
                abs(ell - paper["loss"]) / PAPER_ROUNDING["loss"],
            ),
        }
        for step, a, ell in zip(curve.steps, acc, curve.metrics[f"{split}_loss"])
    ]


def nearest_tables(
    runs: ProtocolRuns, names: Mapping[str, str], labels: Sequence[str]
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, object]]:
    """The evaluation nearest the paper's numbers (the first on ties) per corpus,
    split, model and label; per protocol (each model at its own step size, or both at
    one step) and model; the protocols' distances and the quoted fields."""
    rows, pairs, numbers = {}, {}, {}
    dist = itemgetter("dist.")
    for name, data in names.items():
        for split in ("train", "test"):
            every = {}  # (model, label): the rows of every seed (and scale), in order
            for model, words in _MODELS.items():
                for label in labels:
                    curves = {
                        (_NORM1, s): runs.curves[(name, model, label, s)]
                        for s in runs.seeds
                    }
                    if model == "random_E":
                        curves[(_UNIT, runs.seeds[0])] = runs.unit_entries[
                            (name, label)
                        ]
                    every[(model, label)] = [
                        row
                        for key, curve in curves.items()
                        for row in evaluations(curve, model, split, label, key)
                    ]
                    best = min(every[(model, label)], key=dist)
                    rows[(data, split, words, label)] = {
                        k: v for k, v in best.items() if k != "step size"
                    }
            own = {
                m: min((r for lab in labels for r in every[(m, lab)]), key=dist)
                for m in _MODELS
            }
            # both at one step size, seed and step: the unit-entries rows drop out
            paired = min(
                (
                    {"full": f, "random_E": r}
                    for lab in labels
                    for f, r in zip(every[("full", lab)], every[("random_E", lab)])
                ),
                key=lambda pair: max(map(dist, pair.values())),
            )
            for protocol, short, pair in (
                ("own step sizes", "own", own),
                ("one step", "paired", paired),
            ):
                for model, row in pair.items():
                    pairs[(data, split, protocol, _MODELS[model])] = row
                numbers[f"{name}_{split}_nearest_{short}"] = max(
                    map(dist, pair.values())
                )
            for short, model in (("trained", "full"), ("random", "random_E")):
                row, key = own[model], f"{name}_{split}_own_{short}"
                numbers[f"{key}_accuracy"] = row["acc."]
                numbers[f"{key}_loss"] = row["loss"]
                numbers[f"{key}_lr"] = row["step size"]
                numbers[f"{key}_E"] = row["E"]
                numbers[f"{key}_step"] = int(row["step"])
    per_model = pd.DataFrame.from_dict(rows, orient="index")
    protocols = pd.DataFrame.from_dict(pairs, orient="index")
    return (
        per_model.rename_axis(["data", "split", "model", "dynamics"]),
        protocols.rename_axis(["data", "split", "protocol", "model"]),
        numbers,
    )


def loss_rise(curves: Sequence[Curve]) -> dict[str, float]:
    """The largest ratio of last to lowest training loss over ``curves``, and how many
    end at twice their lowest or more."""
    last_to_lowest = [
        c.metrics["train_loss"][-1] / min(c.metrics["train_loss"]) for c in curves
    ]
    return {
        "loss_rise_max": max(last_to_lowest),
        "loss_spikes": sum(r >= 2 for r in last_to_lowest),
    }


def accuracy_statistics(
    fulls: Sequence[Curve], rands: Sequence[Curve], n_test: int
) -> tuple[dict[str, float], dict[str, float]]:
    """What the checks of claim C6a compare over the seeds (``se``: binomial standard
    error of the gap of best test accuracies), and the spread over the seeds of those
    taken per seed."""
    best = [max(f.metrics["test_accuracy"]) for f in fulls]
    rand = [max(r.metrics["test_accuracy"]) for r in rands]
    per_seed = {
        "gap_min": [a - b for a, b in zip(best, rand)],
        "best_acc": best,
        "low_loss": [min(f.metrics["test_loss"]) for f in fulls],
        "end_gap": [
            f.metrics["test_accuracy"][-1] - r.metrics["test_accuracy"][-1]
            for f, r in zip(fulls, rands)
        ],
    }
    stats = {
        "gap_min": min(per_seed["gap_min"]),
        "se_max": max(
            float(np.sqrt((a * (1 - a) + b * (1 - b)) / n_test))
            for a, b in zip(best, rand)
        ),
        "random_best": max(rand),
        "loss_ratio": min(
            min(r.metrics["train_loss"]) / min(f.metrics["train_loss"])
            for f, r in zip(fulls, rands)
        ),
        **loss_rise(fulls),
        "best_acc": max(best),
        "low_loss": min(per_seed["low_loss"]),
        "end_gap": max(per_seed["end_gap"]),
    }
    return stats, {k: spread_over(v) for k, v in per_seed.items()}


def accuracy_quotes(
    stats: Mapping[str, float], table: pd.DataFrame, label: str, unit_entries: Curve
) -> dict[str, float]:
    """The numbers of claim C6a the text quotes for one corpus and label."""
    full, rand = (table.loc[(label, _MODELS[m], "test")] for m in _MODELS)
    train_full = table.loc[(label, _MODELS["full"], "train")]
    return {
        "loss_rise_max": stats["loss_rise_max"],
        "loss_spikes": stats["loss_spikes"],
        "trained_best_test_acc": stats["best_acc"],
        "trained_low_test_loss": stats["low_loss"],
        "test_gap": stats["end_gap"],
        "best_gap_min": stats["gap_min"],
        "best_gap_se": stats["se_max"],
        "random_best_test_acc": stats["random_best"],
        "trained_end_test_acc": full["acc. (end)"],
        "random_end_test_acc": rand["acc. (end)"],
        "random_end_test_loss": rand["loss (end)"],
        "trained_train_acc_step": train_full["step: paper acc."],
        "trained_train_loss_step": train_full["step: paper loss"],
        "random_test_acc_step": rand["step: paper acc."],
        "unit_entries_end_test_acc": unit_entries.metrics["test_accuracy"][-1],
        "unit_entries_end_test_loss": unit_entries.metrics["test_loss"][-1],
    }


def scale_table(
    runs: ProtocolRuns, names: Mapping[str, str], labels: Sequence[str]
) -> tuple[pd.DataFrame, float]:
    """Random fixed ``E`` from rows of norm one and ``N(0, 1)`` entries (first seed),
    and the largest change of the final test accuracy between the two."""
    rows, change = {}, 0.0
    for name in names:
        for label in labels:
            norm1 = runs.curves[(name, "random_E", label, runs.seeds[0])]
            unit = runs.unit_entries[(name, label)]
            for scale, cur in ((_NORM1, norm1), (_UNIT, unit)):
                rows[(names[name], label, scale)] = {
                    "test acc. (end)": cur.metrics["test_accuracy"][-1],
                    "test loss (end)": cur.metrics["test_loss"][-1],
                    "best test acc.": max(cur.metrics["test_accuracy"]),
                    "train acc. (end)": cur.metrics["train_accuracy"][-1],
                }
            end = [c.metrics["test_accuracy"][-1] for c in (norm1, unit)]
            change = max(change, abs(end[1] - end[0]))
    table = pd.DataFrame(rows).T
    return table.rename_axis(["data", "dynamics", "random E"]), change


# ------------------------------------------------------------------ spread ratio (C6b)
def spread_runs(
    runs: ProtocolRuns, names: Mapping[str, str], labels: Sequence[str]
) -> dict[tuple[str, str], pd.DataFrame]:
    """The spread ratios (one step then frozen ``E`` over trained ``E``, first seed)
    along training in the paper's binning, per corpus and label."""
    spreads = {}
    for name in names:
        lo, hi = observed_range(runs.importance[name])
        for label in labels:
            spreads[(name, label)] = spread_curves(
                runs.importance[name],
                runs.curves[(name, "one_step_head", label, runs.seeds[0])],
                runs.curves[(name, "full", label, runs.seeds[0])],
                lo=lo,
                hi=hi,
            )
    return spreads


def crossing_steps(spreads: pd.DataFrame, score: str) -> dict[str, float]:
    """Per reading of a ``spread_curves`` table, the first step with the ratio of
    ``score`` at most the paper's (``NaN``: never)."""
    out = {}
    for reading, part in spreads[spreads["score"] == score].groupby(
        "reading", sort=False
    ):
        hit = part.sort_values("step")
        hit = hit[hit["ratio"] <= PAPER_SPREAD_RATIO[score]]
        out[reading] = float(hit["step"].iloc[0]) if len(hit) else np.nan
    return out


def crossing_table(
    spreads: Mapping[tuple[str, str], pd.DataFrame],
    names: Mapping[str, str],
    tags: Mapping[str, str],
) -> tuple[pd.DataFrame, dict[str, float], dict[str, float]]:
    """Per corpus, label and score: the first step at the paper's ratio and the ratio
    at the end, per reading (also as quoted numbers); the smallest scale-free ratio
    from step 10 on."""
    rows, numbers, late_min = {}, {}, {}
    first = "first step at the paper's ratio"
    for name in names:
        for label, tag in tags.items():
            frame = spreads[(name, label)]
            end = frame[frame["step"] == frame["step"].max()]
            end = end.set_index(["score", "reading"])["ratio"]
            for score, slug in (("E.v", "value"), ("E.p", "cls")):
                cross = crossing_steps(frame, score)
                row = {(first, r): cross[r] for r in SPREAD_READINGS}
                for r in SPREAD_READINGS:
                    row[("ratio at the end", r)] = end.loc[(score, r)]
                    key = f"{name}_{tag}_{slug}_{r.replace('-', '_')}"
                    numbers[f"{key}_end"] = end.loc[(score, r)]
                    numbers[f"{key}_cross"] = cross[r]
                rows[(names[name], label, score.replace(".", "·"))] = row
                late = frame[
                    (frame["score"] == score)
                    & (frame["reading"] == "scale-free")
                    & (frame["step"] >= 10)
                ]
                late_min[f"{name}_{tag}_{slug}"] = late["ratio"].min()
    table = pd.DataFrame(rows).T.rename_axis(["data", "dynamics", "score"])
    return table, numbers, late_min


# ------------------------------------------------------- the picture along training
def spans(steps: Sequence[int], grid: Sequence[int]) -> str:
    """Consecutive evaluation steps of ``grid`` in ``steps``, as 'a–b' ranges."""
    out, run = [], []
    for s in [*grid, None]:
        if s is not None and s in steps:
            run.append(s)
        elif run:
            out.append(f"{run[0]}–{run[-1]}" if len(run) > 1 else str(run[0]))
            run = []
    return ", ".join(out)


def hold_table(
    along: Mapping[tuple[str, str], pd.DataFrame],
    holds: Mapping[tuple[str, str], Sequence[int]],
    names: Mapping[str, str],
    tags: Mapping[str, str],
) -> tuple[pd.DataFrame, dict[str, object], dict[str, tuple[float, str, float]]]:
    """Per corpus and label: the steps where the picture holds, the smallest of its
    four statistics at the end, the step of the largest U; the quoted numbers; the
    smallest at the end with its words and its spread over the seeds."""
    rows, numbers, ends = {}, {}, {}
    for name in names:
        for label, tag in tags.items():
            frame = along[(name, label)]
            grid = sorted(frame["step"].unique())
            budget = int(grid[-1])
            text = spans(holds[(name, label)], grid) or "none"
            end = frame[
                (frame["step"] == budget) & frame["statistic"].isin(MAIN_STATISTICS)
            ]
            cls = frame[frame["statistic"] == "cls"]
            peak = cls.groupby("step")["value"].mean().idxmax()
            rows[(names[name], label)] = {
                "steps where the picture holds": text,
                "smallest of the four at the end": end["value"].min(),
                "step of the largest ρ(E·p, |I|)": peak,
            }
            key = f"{name}_{tag}_picture"
            numbers[f"{key}_holds"] = text
            numbers[f"{key}_peak_step"] = int(peak)
            for stat in ("value", "cls"):
                part = end[end["statistic"] == stat]["value"]
                numbers[f"{key}_end_{stat}"] = part.min()
            ends[f"{name}_{tag}"] = (
                end["value"].min(),
                "smallest of the four correlations of the picture over "
                f"{frame['seed'].nunique()} seeds at the end of a {budget}-step budget "
                f"(it holds at steps {text}), {label}, {names[name]}",
                spread_over(end.groupby("seed")["value"].min()),
            )
    return pd.DataFrame(rows).T.rename_axis(["data", "dynamics"]), numbers, ends


# ------------------------------------------------------------ figures and tables
_MODEL_COLORS = {
    "full": PALETTE["theory"],
    "random_E": PALETTE["negative"],
    "one_step_head": PALETTE["positive"],
}
_READ_STYLE = {"tokens": "-", "bins": "--", "scale-free": ":"}
_DATA_COLOR = {"imdb": PALETTE["theory"], "yelp": PALETTE["negative"]}


def _legend(fig, handles: list, ncol: int, bottom: float) -> None:
    fig.legend(
        handles=handles, loc="lower center", ncol=ncol, fontsize=10, frameon=False
    )
    # laid out again whenever drawn: after fit_to_column too
    fig.set_layout_engine("tight", rect=(0, bottom, 1, 1))


def _line(color: str = "0.3", ls: str = "-", **kw) -> Line2D:
    return Line2D([], [], color=color, ls=ls, **kw)


def curve_figure(runs: ProtocolRuns, name: str, title: str, labels: Sequence[str]):
    """Accuracy and loss (training split solid, test dashed) of the three models along
    the budget of each dynamics label (first seed), with the paper's numbers dotted."""
    fig, axes = plt.subplots(2, 2, figsize=(9.0, 7.0), sharex="col")
    for (c, label), (r, metric) in product(enumerate(labels), enumerate(METRICS)):
        ax = axes[r, c]
        for model, color in _MODEL_COLORS.items():
            cur = runs.curves[(name, model, label, runs.seeds[0])]
            steps = np.maximum(cur.steps, 0.7)  # step 0 drawn left of step 1
            for split, ls in (("train", "-"), ("test", "--")):
                ax.plot(
                    steps, cur.metrics[f"{split}_{metric}"], ls, color=color, lw=1.6
                )
            if model in PAPER_ACCURACY_LOSS:
                paper = PAPER_ACCURACY_LOSS[model][metric]
                ax.axhline(paper, color=color, ls=":", lw=1.3)
        ax.set_xscale("log")
        ax.set_ylabel(metric)
        ax.set_title(f"{title}, {label}: {metric}", fontsize=11)
        if r:
            ax.set_xlabel("training step (log scale; step 0 at the left edge)")
    handles = [_line(_MODEL_COLORS[m], label=ABLATIONS[m][0]) for m in ABLATIONS]
    handles += [
        _line(ls="-", label="training split"),
        _line(ls="--", label="test split"),
    ]
    _legend(fig, [*handles, _line(ls=":", label="paper's value")], 3, 0.09)
    return fig


def spread_figure(
    spreads: Mapping[tuple[str, str], pd.DataFrame],
    names: Mapping[str, str],
    labels: Sequence[str],
):
    """The spread ratio (frozen over trained) of both scores along training, in the
    three readings of ``SPREAD_READINGS``, one column per dynamics label."""
    fig, axes = plt.subplots(2, 2, figsize=(9.0, 7.2), sharex="col", sharey="row")
    for (c, label), (r, score) in product(enumerate(labels), enumerate(("E.v", "E.p"))):
        ax = axes[r, c]
        for name, (reading, ls) in product(names, _READ_STYLE.items()):
            frame = spreads[(name, label)]
            sub = frame[(frame["score"] == score) & (frame["reading"] == reading)]
            ax.plot(sub["step"], sub["ratio"], ls, color=_DATA_COLOR[name], lw=1.6)
        ax.axhline(PAPER_SPREAD_RATIO[score], color="0.3", lw=1.0)
        ax.axhline(1.0, color="0.7", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{label}: {score.replace('.', '·')}", fontsize=11)
        ax.set_ylabel("spread ratio, frozen / trained")
        if r:
            ax.set_xlabel("training step (log scale)")
    handles = [_line(_DATA_COLOR[n], label=names[n]) for n in names]
    handles += [_line(ls=ls, label=SPREAD_READINGS[r]) for r, ls in _READ_STYLE.items()]
    paper = _line(lw=1.0, label="paper: 1/8 (E·v), 1/6 (E·p)")
    _legend(fig, [*handles, paper], 3, 0.11)
    return fig


def along_figure(
    along: Mapping[tuple[str, str], pd.DataFrame],
    names: Mapping[str, str],
    labels: Sequence[str],
    seeds: Sequence[int],
    *,
    threshold: float,
    budget: int,
):
    """The value trend and the U along training, every seed, one line colour per
    dynamics label, with the ``threshold`` and the real-data chapter's ``budget``."""
    colors = dict(zip(labels, (PALETTE["theory"], PALETTE["negative"])))
    fig, axes = plt.subplots(2, 2, figsize=(9.0, 7.0), sharex=True, sharey=True)
    for (r, name), (c, key) in product(enumerate(names), enumerate(("value", "cls"))):
        ax = axes[r, c]
        for label, seed in product(labels, seeds):
            frame = along[(name, label)]
            sub = frame[(frame["statistic"] == key) & (frame["seed"] == seed)]
            ax.plot(sub["step"], sub["value"], color=colors[label], lw=1.4, alpha=0.85)
        ax.axhline(threshold, color="0.5", lw=0.9, ls="--")
        ax.axvline(budget, color="0.3", lw=0.9, ls=":")
        ax.set_xscale("log")
        ax.set_title(f"{names[name]}: {PICTURE_STATISTICS[key]}", fontsize=11)
        if c == 0:
            ax.set_ylabel("rank correlation")
        if r:
            ax.set_xlabel("training step (log scale)")
    handles = [_line(colors[lab], label=lab) for lab in labels]
    handles += [
        _line("0.5", "--", label=f"{threshold} (asserted in chapter 4)"),
        _line(ls=":", label=f"chapter 4's budget ({budget} steps)"),
    ]
    _legend(fig, handles, 2, 0.09)
    return fig


def styled(table: pd.DataFrame):
    """A table of this module, formatted: steps and seeds whole (``never``: none),
    the paper's numbers two decimals, distances one, the rest three."""
    steps = [c for c in table.columns if "step" in str(c) and c != "step size"]
    steps += [c for c in ("seed",) if c in table.columns]
    numeric = table.select_dtypes("number").columns
    style = table.style.format("{:.3f}", subset=[c for c in numeric if c not in steps])
    style = style.format("{:.0f}", subset=steps, na_rep="never")
    present = [c for c in ("paper acc.", "paper loss") if c in table.columns]
    style = style.format("{:.2f}", subset=present)
    return style.format("{:.1f}", subset=[c for c in ("dist.",) if c in table.columns])
