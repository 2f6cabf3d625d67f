"""The runs of the chapter on the paper's protocol: learning curves of the models of
:data:`~attnbook.experiments.curves.ABLATIONS` at equal budgets, where the numbers the
paper's authors reported fall on them (each exact to its rounding), the spread ratio and
the picture along training."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
import pandas as pd
import torch

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
from attnbook.experiments.spreads import spread_over

#: The paper's accuracy and loss by model (key of :data:`ABLATIONS`).
PAPER_ACCURACY_LOSS = {
    "full": {"accuracy": 0.95, "loss": 0.1},
    "random_E": {"accuracy": 0.72, "loss": 0.6},
}
#: Half a unit of the paper's last digit (whole percents, tenths of a loss).
PAPER_ROUNDING = {"accuracy": 0.005, "loss": 0.05}
#: The paper's spread ratio (one step then frozen ``E`` over full training), by score.
PAPER_SPREAD_RATIO = {"E.v": 1 / 8, "E.p": 1 / 6}
#: The two models with numbers in the paper, in the words of the tables.
_MODELS = {m: ABLATIONS[m][0] for m in ("full", "random_E")}


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
                    "model": ABLATIONS[model][0],
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
    curve: Curve,
    model: str,
    split: str,
    *,
    rounding: Mapping[str, float] = PAPER_ROUNDING,
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
    if min(accuracy_tol, loss_tol) < 0:
        raise ValueError("the tolerances must be non-negative")
    full, rand = curves[("full", label)], curves[("random_E", label)]
    rounding = {"accuracy": accuracy_tol, "loss": loss_tol}
    both = set(window_steps(rand, "random_E", split, rounding=rounding))
    return [
        s for s in window_steps(full, "full", split, rounding=rounding) if s in both
    ]


def _point_at(curve: Curve, j: int, model: str, split: str, key: object) -> dict:
    """Evaluation ``j`` of ``curve``: ``key``, ``step``, accuracy and loss, each minus
    the paper's, and ``distance`` (the larger, in units of the rounding)."""
    a, ell = curve.metrics[f"{split}_accuracy"][j], curve.metrics[f"{split}_loss"][j]
    paper = PAPER_ACCURACY_LOSS[model]
    distance = max(
        abs(a - paper["accuracy"]) / PAPER_ROUNDING["accuracy"],
        abs(ell - paper["loss"]) / PAPER_ROUNDING["loss"],
    )
    return {
        "key": key,
        "step": curve.steps[j],
        "accuracy": a,
        "loss": ell,
        "accuracy_off": a - paper["accuracy"],
        "loss_off": ell - paper["loss"],
        "distance": distance,
    }


def nearest_point(curves: Mapping[object, Curve], model: str, split: str) -> dict:
    """The point (:func:`_point_at`) of every curve and step nearest the paper's
    numbers for ``model`` (the first on ties)."""
    if not curves:
        raise ValueError("curves must not be empty")
    best = None
    for key, curve in curves.items():
        for j in range(len(curve.steps)):
            point = _point_at(curve, j, model, split, key)
            if best is None or point["distance"] < best["distance"]:
                best = point
    return best


def accuracy_gap(full: Curve, rand: Curve, n_test: int) -> dict[str, float]:
    """Each model's best test accuracy, their ``gap`` and its binomial standard error
    ``se = sqrt((a(1 - a) + b(1 - b)) / n_test)`` (conservative: same reviews)."""
    if n_test < 1:
        raise ValueError(f"n_test must be positive, got {n_test}")
    a = max(full.metrics["test_accuracy"])
    b = max(rand.metrics["test_accuracy"])
    se = float(np.sqrt((a * (1 - a) + b * (1 - b)) / n_test))
    return {"trained": a, "random": b, "gap": a - b, "se": se}


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


def crossing_steps(spreads: pd.DataFrame, score: str) -> dict[str, float]:
    """Per reading of a ``spread_curves`` table, the first step with the ratio of
    ``score`` at most the paper's (``NaN``: never)."""
    if score not in PAPER_SPREAD_RATIO:
        raise ValueError(f"score must be one of {sorted(PAPER_SPREAD_RATIO)}")
    out = {}
    sub = spreads[spreads["score"] == score]
    for reading, part in sub.groupby("reading", sort=False):
        part = part.sort_values("step")
        hit = part[part["ratio"] <= PAPER_SPREAD_RATIO[score]]
        out[reading] = float(hit["step"].iloc[0]) if len(hit) else np.nan
    return out


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
    """Adam curves for every ``label -> (step size, budget)`` of ``runs``: the three
    models on the first seed, trained and random fixed ``E`` on the others, random
    fixed ``E`` from ``N(0, 1)`` entries on the first; trained ``E`` by autograd too
    for each ``(corpus, label)`` of ``autograd``."""
    out = ProtocolRuns({}, {}, {}, {}, seeds)
    for name, corpus in corpora.items():
        out.importance[name], alpha, out.doc_freq[name] = token_statistics(corpus)
        eta = one_step_eta(alpha, dim, sigma)
        for seed in seeds:
            generator = torch.Generator().manual_seed(seed)
            points = starting_points(
                corpus,
                dim=dim,
                sigma=sigma,
                eta=eta,
                generator=generator,
                device=device,
            )
            models = tuple(ABLATIONS) if seed == seeds[0] else ("full", "random_E")
            for label, (lr, budget) in runs.items():
                steps = log_steps(budget, 5)
                got = ablation_curves(
                    corpus, points, {label: Dynamics.adam(lr)}, steps, models=models
                )
                out.curves.update({(name, *key, seed): c for key, c in got.items()})
                if (name, label) in autograd:
                    out.autograd.setdefault((name, label), []).append(
                        train_curve(
                            points.init,
                            corpus,
                            trainable=("E", "p", "v"),
                            dynamics=Dynamics.adam(lr),
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
                        dynamics=Dynamics.adam(lr),
                        eval_steps=steps,
                    )
    return out


def _steps_text(steps: Sequence[int]) -> str:
    return ", ".join(map(str, steps)) or "none"


def match_table(
    runs: ProtocolRuns, names: Mapping[str, str], tags: Mapping[str, str]
) -> tuple[pd.DataFrame, dict[str, int]]:
    """Per corpus, label, split and seed: the steps at which each model, and both, are
    at the paper's numbers; and how many with both, keyed
    ``<corpus>_<tag>_<split>_match``."""
    rows, counts = {}, {}
    for name in names:
        for label, tag in tags.items():
            for split in ("train", "test"):
                both_all = []
                for seed in runs.seeds:
                    sub = runs.at(name, seed)
                    both = matching_steps(sub, label, split)
                    both_all += both
                    full, rand = sub[("full", label)], sub[("random_E", label)]
                    rows[(names[name], label, split, seed)] = {
                        "trained E at 95% / 0.1": _steps_text(
                            window_steps(full, "full", split)
                        ),
                        "random fixed E at 72% / 0.6": _steps_text(
                            window_steps(rand, "random_E", split)
                        ),
                        "both": _steps_text(both),
                    }
                counts[f"{name}_{tag}_{split}_match"] = len(both_all)
    frame = pd.DataFrame(rows).T.rename_axis(["data", "dynamics", "split", "seed"])
    return frame, counts


_UNIT = "N(0, 1) entries"


def _model_curves(
    runs: ProtocolRuns, name: str, model: str, label: str
) -> dict[tuple[str, int], Curve]:
    """One model's curves at one label, keyed ``(embedding scale, seed)``."""
    out = {
        ("rows of norm 1", s): runs.curves[(name, model, label, s)] for s in runs.seeds
    }
    if model == "random_E":
        out[(_UNIT, runs.seeds[0])] = runs.unit_entries[(name, label)]
    return out


def _nearest_paired(
    runs: ProtocolRuns, name: str, labels: Sequence[str], split: str
) -> dict[str, dict[str, object]]:
    """Both models at one label, seed and step: where the farther is nearest."""
    best, best_dist = None, np.inf
    for label in labels:
        for seed in runs.seeds:
            key = ("rows of norm 1", seed)
            full = runs.curves[(name, "full", label, seed)]
            rand = runs.curves[(name, "random_E", label, seed)]
            for j in range(len(full.steps)):
                pair = {
                    "full": _point_at(full, j, "full", split, key) | {"label": label},
                    "random_E": _point_at(rand, j, "random_E", split, key)
                    | {"label": label},
                }
                dist = max(p["distance"] for p in pair.values())
                if dist < best_dist:
                    best, best_dist = pair, dist
    return best


def _row(point: Mapping[str, object]) -> dict[str, object]:
    scale, seed = point["key"]
    return {
        "E": scale,
        "seed": seed,
        "step": point["step"],
        "acc.": point["accuracy"],
        "Δ acc.": point["accuracy_off"],
        "loss": point["loss"],
        "Δ loss": point["loss_off"],
        "dist.": point["distance"],
    }


def nearest_tables(
    runs: ProtocolRuns, names: Mapping[str, str], labels: Sequence[str]
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, object]]:
    """The :func:`nearest_point` per corpus, split, model and label; per protocol (each
    model at its own step size, or both at one step) and model; and the protocols'
    distances (``<corpus>_<split>_nearest_{own,paired}``) with the quoted fields of
    the first (``<corpus>_<split>_own_<trained|random>_<field>``)."""
    rows, pairs, numbers = {}, {}, {}
    for name, data in names.items():
        for split in ("train", "test"):
            own = {}
            for model, words in _MODELS.items():
                for label in labels:
                    curves = _model_curves(runs, name, model, label)
                    point = nearest_point(curves, model, split) | {"label": label}
                    rows[(data, split, words, label)] = _row(point)
                    if model not in own or point["distance"] < own[model]["distance"]:
                        own[model] = point
            paired = _nearest_paired(runs, name, labels, split)
            for protocol, short, pair in (
                ("own step sizes", "own", own),
                ("one step", "paired", paired),
            ):
                for model, point in pair.items():
                    row = {"step size": point["label"], **_row(point)}
                    pairs[(data, split, protocol, _MODELS[model])] = row
                distance = max(p["distance"] for p in pair.values())
                numbers[f"{name}_{split}_nearest_{short}"] = distance
            for short, model in (("trained", "full"), ("random", "random_E")):
                point, key = own[model], f"{name}_{split}_own_{short}"
                numbers[f"{key}_accuracy"] = point["accuracy"]
                numbers[f"{key}_loss"] = point["loss"]
                numbers[f"{key}_lr"] = point["label"]
                numbers[f"{key}_E"] = point["key"][0]
                numbers[f"{key}_step"] = int(point["step"])
    per_model = pd.DataFrame.from_dict(rows, orient="index")
    protocols = pd.DataFrame.from_dict(pairs, orient="index")
    return (
        per_model.rename_axis(["data", "split", "model", "dynamics"]),
        protocols.rename_axis(["data", "split", "protocol", "model"]),
        numbers,
    )


def accuracy_statistics(
    fulls: Sequence[Curve], rands: Sequence[Curve], n_test: int
) -> tuple[dict[str, float], dict[str, float]]:
    """What the checks of claim C6a compare over the seeds (trained and random fixed
    ``E``'s curves, one per seed), and the spread over the seeds of those taken per
    seed."""
    gaps = [accuracy_gap(f, r, n_test) for f, r in zip(fulls, rands)]
    per_seed = {
        "gap_min": [g["gap"] for g in gaps],
        "best_acc": [max(f.metrics["test_accuracy"]) for f in fulls],
        "low_loss": [min(f.metrics["test_loss"]) for f in fulls],
        "end_gap": [
            f.metrics["test_accuracy"][-1] - r.metrics["test_accuracy"][-1]
            for f, r in zip(fulls, rands)
        ],
    }
    stats = {
        "gap_min": min(per_seed["gap_min"]),
        "se_max": max(g["se"] for g in gaps),
        "random_best": max(g["random"] for g in gaps),
        "loss_ratio": min(
            min(r.metrics["train_loss"]) / min(f.metrics["train_loss"])
            for f, r in zip(fulls, rands)
        ),
        **loss_rise(fulls),
        "best_acc": max(per_seed["best_acc"]),
        "low_loss": min(per_seed["low_loss"]),
        "end_gap": max(per_seed["end_gap"]),
    }
    return stats, {k: spread_over(v) for k, v in per_seed.items()}


def accuracy_quotes(
    stats: Mapping[str, float],
    table: pd.DataFrame,
    label: str,
    unit_entries: Curve,
) -> dict[str, float]:
    """The numbers of claim C6a the text quotes for one corpus and label."""
    full, rand = ABLATIONS["full"][0], ABLATIONS["random_E"][0]
    row_full, row_rand = (
        table.loc[(label, full, "test")],
        table.loc[(label, rand, "test")],
    )
    train_full = table.loc[(label, full, "train")]
    return {
        "loss_rise_max": stats["loss_rise_max"],
        "loss_spikes": stats["loss_spikes"],
        "trained_best_test_acc": stats["best_acc"],
        "trained_low_test_loss": stats["low_loss"],
        "test_gap": stats["end_gap"],
        "best_gap_min": stats["gap_min"],
        "best_gap_se": stats["se_max"],
        "random_best_test_acc": stats["random_best"],
        "trained_end_test_acc": row_full["acc. (end)"],
        "random_end_test_acc": row_rand["acc. (end)"],
        "random_end_test_loss": row_rand["loss (end)"],
        "trained_train_acc_step": train_full["step: paper acc."],
        "trained_train_loss_step": train_full["step: paper loss"],
        "random_test_acc_step": row_rand["step: paper acc."],
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
            for scale, cur in (("rows of norm 1", norm1), ("N(0, 1) entries", unit)):
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


def crossing_table(
    spreads: Mapping[tuple[str, str], pd.DataFrame],
    names: Mapping[str, str],
    tags: Mapping[str, str],
) -> tuple[pd.DataFrame, dict[str, float], dict[str, float]]:
    """Per corpus, label and score: the first step at the paper's ratio and the ratio
    at the end, under two headers, per reading (also keyed
    ``<corpus>_<tag>_<score>_<reading>_{end, cross}``); and the smallest scale-free
    ratio from step 10 on."""
    rows, numbers, late_min = {}, {}, {}
    for name in names:
        for label, tag in tags.items():
            frame = spreads[(name, label)]
            end = frame[frame["step"] == frame["step"].max()].set_index(
                ["score", "reading"]
            )
            for score, slug in (("E.v", "value"), ("E.p", "cls")):
                cross = crossing_steps(frame, score)
                first = "first step at the paper's ratio"
                row = {(first, r): cross[r] for r in SPREAD_READINGS}
                for r in SPREAD_READINGS:
                    row[("ratio at the end", r)] = end.loc[(score, r), "ratio"]
                    key = f"{name}_{tag}_{slug}_{r.replace('-', '_')}"
                    numbers[f"{key}_end"] = end.loc[(score, r), "ratio"]
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


def spans(steps: Sequence[int], grid: Sequence[int]) -> str:
    """Consecutive evaluation steps of ``grid`` in ``steps``, as 'a–b' ranges."""
    out, run = [], []
    for s in grid:
        if s in steps:
            run.append(s)
        elif run:
            out.append(run)
            run = []
    if run:
        out.append(run)
    return ", ".join(f"{r[0]}–{r[-1]}" if len(r) > 1 else str(r[0]) for r in out)


def hold_table(
    along: Mapping[tuple[str, str], pd.DataFrame],
    holds: Mapping[tuple[str, str], Sequence[int]],
    names: Mapping[str, str],
    tags: Mapping[str, str],
) -> tuple[pd.DataFrame, dict[str, object], dict[str, tuple[float, str, float]]]:
    """Per corpus and label: the steps where the picture holds, the smallest of its
    four statistics at the end and the step of the largest U; the quoted numbers; and
    the smallest at the end with its words and its spread over the seeds, keyed
    ``<corpus>_<tag>``."""
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
