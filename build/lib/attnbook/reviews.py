"""Review corpora ready for the model: vocabulary, token counts, +-1 labels and star ratings.

:func:`prepare_reviews` loads a dataset through :func:`attnbook.data.load_reviews`, builds the
vocabulary on the *training* split (tokens with document frequency at least ``min_df``, see
:mod:`attnbook.data`), encodes both splits, drops the documents left without an in-vocabulary
token, and returns a :class:`ReviewCorpus` whose labels, star ratings and (test) texts are
aligned with the kept documents. :func:`build_review_corpus` does the same from texts and labels
already in memory (used by the tests and by anyone with their own data).
:func:`split_validation` carves a seeded, stratified validation set out of the training split
(the models are fitted on the rest and the validation loss chooses the reported step).

:func:`highlight_html` renders a text with every in-vocabulary word shaded by a per-token
weight (for example the attention weight that the ``<cls>`` query gives it).
"""

from __future__ import annotations

import dataclasses
import html
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

import numpy as np
import torch

from .counts import TokenCounts
from .data import Vocabulary, load_reviews
from .train import History, binary_loss_closure, fit

if TYPE_CHECKING:  # pandas is imported where a table is built
    import pandas as pd

__all__ = [
    "STAR_COLUMNS",
    "ReviewCorpus",
    "build_review_corpus",
    "prepare_reviews",
    "split_validation",
    "min_df_for_vocabulary_size",
    "highlight_html",
    "evaluate_binary",
    "document_outcomes",
    "paired_mean_difference",
    "plateau_stop",
    "plateau_stop_step",
    "train_on_reviews",
    "token_scores",
    "history_frame",
    "ReviewExperimentConfig",
    "ReviewExperiment",
    "run_review_experiment",
    "top_tokens",
    "pick_examples",
]


#: The column holding the star rating in each data set of :func:`attnbook.data.load_reviews`.
STAR_COLUMNS = {"imdb": "rating", "yelp": "stars"}


@dataclass(frozen=True)
class ReviewCorpus:
    """A binary review data set encoded over one vocabulary.

    Attributes
    ----------
    name:
        ``"imdb"``, ``"yelp"`` or any name given to :func:`build_review_corpus`.
    vocabulary:
        the :class:`~attnbook.data.Vocabulary` built on the training texts.
    train, test:
        :class:`~attnbook.counts.TokenCounts` of the kept documents of each split.
    train_labels, test_labels:
        ``(n,)`` int64 NumPy arrays of labels in ``{-1, +1}``, aligned with ``train`` / ``test``.
    train_stars, test_stars:
        ``(n,)`` int64 star ratings aligned with the kept documents (IMDB 1-10, Yelp 1-5), or
        ``None`` when the data has none.
    test_texts:
        the raw texts of the kept test documents (for highlighting).
    train_kept, test_kept:
        row numbers of the kept documents in the original splits.
    n_documents, n_tokens, n_dropped_tokens:
        per split (``{"train": ..., "test": ...}``): documents before dropping, token
        occurrences, and occurrences dropped because they are outside the vocabulary (of the
        whole training split, also after :func:`split_validation`).
    validation, validation_labels, validation_kept:
        ``None``, or after :func:`split_validation` the held-out part of the training split:
        its counts, +-1 labels and row numbers in the original training split. ``train``,
        ``train_labels``, ``train_stars`` and ``train_kept`` then hold the remaining rows.
    """

    name: str
    vocabulary: Vocabulary
    train: TokenCounts
    test: TokenCounts
    train_labels: np.ndarray
    test_labels: np.ndarray
    train_stars: np.ndarray | None
    test_stars: np.ndarray | None
    test_texts: tuple[str, ...]
    train_kept: np.ndarray
    test_kept: np.ndarray
    n_documents: Mapping[str, int]
    n_tokens: Mapping[str, int]
    n_dropped_tokens: Mapping[str, int]
    validation: TokenCounts | None = None
    validation_labels: np.ndarray | None = None
    validation_kept: np.ndarray | None = None

    @property
    def vocab_size(self) -> int:
        return len(self.vocabulary)

    @property
    def n_dropped_documents(self) -> dict[str, int]:
        """Documents left without any in-vocabulary token, per split."""
        n_val = 0 if self.validation_kept is None else int(self.validation_kept.size)
        return {
            "train": self.n_documents["train"] - int(self.train_kept.size) - n_val,
            "test": self.n_documents["test"] - int(self.test_kept.size),
        }

    @property
    def dropped_token_fraction(self) -> dict[str, float]:
        """Fraction of token occurrences outside the vocabulary, per split."""
        return {s: self.n_dropped_tokens[s] / max(self.n_tokens[s], 1) for s in ("train", "test")}

    @property
    def positive_fraction(self) -> dict[str, float]:
        """Fraction of positive (+1) documents among the kept ones, per split (the imbalance)."""
        return {
            "train": float((self.train_labels == 1).mean()),
            "test": float((self.test_labels == 1).mean()),
        }

    def labels(
        self,
        split: str,
        *,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None,
    ) -> torch.Tensor:
        """The +-1 labels of ``split`` (``"train"``, ``"validation"`` or ``"test"``) as a float tensor."""
        arrays = {"train": self.train_labels, "validation": self.validation_labels, "test": self.test_labels}
        if split not in arrays:
            raise ValueError(f"split must be 'train', 'validation' or 'test', got {split!r}")
        arr = arrays[split]
        if arr is None:
            raise ValueError("this corpus has no validation split (see split_validation)")
        return torch.from_numpy(arr).to(dtype=dtype, device=device)

    def summary(self) -> dict[str, float]:
        """The numbers a chapter reports about the corpus, as a flat dictionary."""
        return {
            "vocab_size": self.vocab_size,
            "min_df": self.vocabulary.min_df,
            "n_train": self.train.n_sequences,
            "n_validation": 0 if self.validation is None else self.validation.n_sequences,
            "n_test": self.test.n_sequences,
            "dropped_train_documents": self.n_dropped_documents["train"],
            "dropped_test_documents": self.n_dropped_documents["test"],
            "dropped_train_token_fraction": self.dropped_token_fraction["train"],
            "dropped_test_token_fraction": self.dropped_token_fraction["test"],
            "positive_fraction_train": self.positive_fraction["train"],
            "positive_fraction_test": self.positive_fraction["test"],
            "mean_train_length": float(self.train.lengths.double().mean()),
        }


def _signed(labels01: object, what: str) -> np.ndarray:
    arr = np.asarray(labels01)
    if arr.ndim != 1 or arr.dtype.kind not in "iub":
        raise ValueError(f"{what} must be a 1-D integer array of 0/1 labels")
    if not np.isin(arr, (0, 1)).all():
        bad = arr[~np.isin(arr, (0, 1))][0]
        raise ValueError(f"{what} must be 0 (negative) or 1 (positive); found {bad!r}")
    return (2 * arr.astype(np.int64) - 1).astype(np.int64)


def _optional(values: object | None, n: int, what: str) -> np.ndarray | None:
    if values is None:
        return None
    arr = np.asarray(values, dtype=np.int64)
    if arr.shape != (n,):
        raise ValueError(f"{what} has shape {arr.shape}, expected ({n},)")
    return arr


def build_review_corpus(
    train_texts: Sequence[str],
    train_labels01: object,
    test_texts: Sequence[str],
    test_labels01: object,
    *,
    min_df: int,
    name: str = "reviews",
    train_stars: object | None = None,
    test_stars: object | None = None,
) -> ReviewCorpus:
    """Encode texts with 0/1 labels into a :class:`ReviewCorpus` (vocabulary from the train texts).

    Labels are mapped to +-1 (``2 * label - 1``). Documents with no in-vocabulary token are
    dropped from either split and counted; labels, stars and test texts follow the kept rows.
    """
    train_texts, test_texts = list(train_texts), list(test_texts)
    y_train = _signed(train_labels01, "train_labels01")
    y_test = _signed(test_labels01, "test_labels01")
    if y_train.size != len(train_texts) or y_test.size != len(test_texts):
        raise ValueError(
            f"labels and texts differ in length: train {y_train.size} vs {len(train_texts)}, "
            f"test {y_test.size} vs {len(test_texts)}"
        )
    stars_train = _optional(train_stars, len(train_texts), "train_stars")
    stars_test = _optional(test_stars, len(test_texts), "test_stars")
    vocab = Vocabulary.build(train_texts, min_df)
    enc_train = vocab.encode(train_texts, drop_empty=True)
    enc_test = vocab.encode(test_texts, drop_empty=True)
    kt, ks = enc_train.kept, enc_test.kept
    if np.unique(y_train[kt]).size < 2:
        raise ValueError("the kept training documents hold a single class")
    return ReviewCorpus(
        name=name,
        vocabulary=vocab,
        train=enc_train.counts,
        test=enc_test.counts,
        train_labels=y_train[kt],
        test_labels=y_test[ks],
        train_stars=None if stars_train is None else stars_train[kt],
        test_stars=None if stars_test is None else stars_test[ks],
        test_texts=tuple(test_texts[i] for i in ks),
        train_kept=kt,
        test_kept=ks,
        n_documents={"train": enc_train.n_documents, "test": enc_test.n_documents},
        n_tokens={"train": enc_train.n_tokens, "test": enc_test.n_tokens},
        n_dropped_tokens={"train": enc_train.n_dropped_tokens, "test": enc_test.n_dropped_tokens},
    )


def prepare_reviews(name: str, min_df: int) -> ReviewCorpus:
    """Load ``imdb`` or ``yelp`` (see :func:`attnbook.data.load_reviews`) and encode both splits.

    The star rating (``rating`` for IMDB, ``stars`` for Yelp) is kept when the data has it.
    Yelp's 3-star reviews are already dropped by the loader; its classes stay imbalanced
    (about 77 % positive), which :attr:`ReviewCorpus.positive_fraction` reports.
    """
    splits = {s: load_reviews(name, s) for s in ("train", "test")}
    star_col = STAR_COLUMNS.get(name)

    def stars(ds):
        return ds[star_col] if star_col in ds.column_names else None

    tr, te = splits["train"], splits["test"]
    return build_review_corpus(
        tr["text"], tr["label"], te["text"], te["label"],
        min_df=min_df, name=name, train_stars=stars(tr), test_stars=stars(te),
    )


def split_validation(corpus: ReviewCorpus, fraction: float, rng: np.random.Generator) -> ReviewCorpus:
    """Hold out a stratified random ``fraction`` of the training documents as a validation set.

    In each class, ``round(fraction * n_class)`` documents (at least one, at most all but one)
    are drawn without replacement from ``rng``; the returned corpus has them as ``validation``
    and the other training documents as ``train`` (both in their original order). The
    vocabulary, the test split and the encoding counts are unchanged.
    """
    if corpus.validation is not None:
        raise ValueError("the corpus already has a validation split")
    if not 0 < fraction < 1:
        raise ValueError(f"fraction must be in (0, 1), got {fraction}")
    if not isinstance(rng, np.random.Generator):
        raise ValueError("rng must be a numpy.random.Generator (see attnbook.utils.seed_everything)")
    y = corpus.train_labels
    held = []
    for label in (-1, 1):
        rows = np.flatnonzero(y == label)
        k = min(max(int(round(fraction * rows.size)), 1), rows.size - 1)
        if k < 1:
            raise ValueError(f"class {label:+d} has fewer than two training documents")
        held.append(rng.choice(rows, size=k, replace=False))
    is_val = np.zeros(y.size, dtype=bool)
    is_val[np.concatenate(held)] = True
    val, rest = np.flatnonzero(is_val), np.flatnonzero(~is_val)
    return dataclasses.replace(
        corpus,
        train=corpus.train.select(rest),
        train_labels=y[rest],
        train_stars=None if corpus.train_stars is None else corpus.train_stars[rest],
        train_kept=corpus.train_kept[rest],
        validation=corpus.train.select(val),
        validation_labels=y[val],
        validation_kept=corpus.train_kept[val],
    )


def min_df_for_vocabulary_size(
    texts: Sequence[str], target: int, candidates: Sequence[int] = tuple(range(1, 201))
) -> tuple[int, dict[int, int]]:
    """The ``min_df`` among ``candidates`` whose vocabulary size on ``texts`` is closest to
    ``target`` (ties: the larger ``min_df``), and the size for every candidate."""
    if target < 1 or not candidates:
        raise ValueError("target must be positive and candidates non-empty")
    df = Vocabulary.build(texts, 1).document_frequency
    sizes = {int(k): int((df >= k).sum()) for k in candidates}
    best = min(sizes, key=lambda k: (abs(sizes[k] - target), -k))
    return best, sizes


_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?", re.IGNORECASE)


def highlight_html(
    text: str,
    vocabulary: Vocabulary,
    weight: Mapping[int, float] | np.ndarray,
    *,
    color: tuple[int, int, int] = (42, 157, 143),
    max_chars: int | None = 600,
) -> str:
    """HTML of ``text`` with each in-vocabulary word shaded in proportion to ``weight[id]``.

    ``weight`` maps a token id to a non-negative number (an array indexed by id works); the
    shading is relative to the largest weight among the words shown. Words are found with the
    tokenization rule of :mod:`attnbook.data` (matching case-insensitively on the original
    text, so the reader sees the review as written); ``<br />`` tags become line breaks. Text
    beyond ``max_chars`` characters is cut at a word boundary and marked with an ellipsis.
    """
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__}")
    text = text.replace("<br />", "\n")
    if max_chars is not None and len(text) > max_chars:
        cut = text.rfind(" ", 0, max_chars)
        text = text[: cut if cut > 0 else max_chars] + " …"
    pieces: list[tuple[str, float | None]] = []
    pos = 0
    for m in _WORD.finditer(text):
        pieces.append((text[pos : m.start()], None))
        word = m.group(0)
        try:
            tid = vocabulary.id(word.lower())
        except KeyError:
            pieces.append((word, None))
        else:
            w = float(weight[tid])
            if not np.isfinite(w) or w < 0:
                raise ValueError(f"weight of token {word.lower()!r} is {w}; need finite, >= 0")
            pieces.append((word, w))
        pos = m.end()
    pieces.append((text[pos:], None))
    top = max((w for _, w in pieces if w is not None), default=0.0) or 1.0
    r, g, b = color
    out = []
    for chunk, w in pieces:
        esc = html.escape(chunk).replace("\n", "<br>")
        if w is None:
            out.append(esc)
        else:
            out.append(
                f'<span style="background-color: rgba({r},{g},{b},{w / top:.3f}); '
                f'border-radius: 3px" title="{w:.3g}">{esc}</span>'
            )
    return '<div style="line-height: 1.6; font-family: sans-serif">' + "".join(out) + "</div>"


# --------------------------------------------------------------------------- training helpers
def evaluate_binary(
    params: Mapping[str, torch.Tensor], counts: TokenCounts, labels: torch.Tensor
) -> dict[str, float]:
    """Logistic loss, accuracy and balanced accuracy of the one-layer model on ``counts``.

    Balanced accuracy is the mean of the accuracies on the positive and on the negative
    sequences, the number to read on an imbalanced corpus (0.5 for a constant classifier).
    """
    from .losses import accuracy, logistic_loss
    from .model import count_attention_output

    with torch.no_grad():
        f = count_attention_output(params["E"], params["p"], params["v"], counts)
        y = labels.to(f.dtype)
        correct = (f * y) > 0
        pos = y > 0
        balanced = 0.5 * (float(correct[pos].double().mean()) + float(correct[~pos].double().mean()))
        return {
            "loss": float(logistic_loss(f, y)),
            "accuracy": accuracy(f, y),
            "balanced_accuracy": balanced,
        }


def document_outcomes(
    params: Mapping[str, torch.Tensor], counts: TokenCounts, labels: torch.Tensor
) -> dict[str, np.ndarray]:
    """Per-document logistic loss ``log(1 + exp(-y f))`` and correctness (``y f > 0``, as 0/1) of
    the one-layer model, as float64 NumPy arrays (their means are :func:`evaluate_binary`'s
    loss and accuracy)."""
    from .model import count_attention_output

    with torch.no_grad():
        f = count_attention_output(params["E"], params["p"], params["v"], counts)
        margin = labels.to(device=f.device, dtype=f.dtype) * f
        loss = torch.nn.functional.softplus(-margin)
    return {
        "loss": loss.detach().to("cpu", torch.float64).numpy(),
        "correct": (margin > 0).to("cpu", torch.float64).numpy(),
    }


def paired_mean_difference(a: object, b: object, level: float = 0.95) -> dict[str, float]:
    """Mean of ``a - b`` over paired observations (the same test documents under two models)
    with a normal-approximation interval ``mean +- z * sd(a - b) / sqrt(n)``; the pairing
    removes the document-to-document variation the two models share. Returns ``estimate``,
    ``low``, ``high``, ``se`` and ``n``."""
    from scipy.stats import norm

    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape or x.size < 2:
        raise ValueError(f"a and b must be 1-D of one length >= 2, got {x.shape} and {y.shape}")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("a and b must be finite")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    d = x - y
    se = float(d.std(ddof=1) / np.sqrt(d.size))
    z = float(norm.ppf(0.5 + level / 2))
    mean = float(d.mean())
    return {"estimate": mean, "low": mean - z * se, "high": mean + z * se, "se": se, "n": int(d.size)}


def plateau_stop(rel_tol: float = 0.01, window: int = 5, key: str = "train_loss") -> Callable[[History], bool]:
    """Stopping rule for :func:`attnbook.train.fit`: stop once the recorded ``key`` (by default
    the training loss at the evaluation steps) fell by less than ``rel_tol`` (relative) over
    the last ``window`` evaluations (``window * eval_every`` steps)."""
    if not 0 < rel_tol < 1:
        raise ValueError(f"rel_tol must be in (0, 1), got {rel_tol}")
    if window < 1:
        raise ValueError(f"window must be at least 1, got {window}")

    def stop(history: History) -> bool:
        values = history.metrics.get(key, [])
        if len(values) <= window:
            return False
        prev, last = values[-1 - window], values[-1]
        return prev - last < rel_tol * abs(prev)

    return stop


def plateau_stop_step(
    history: History, rel_tol: float = 0.01, window: int = 5, key: str = "train_loss"
) -> int | None:
    """The first evaluation step at which :func:`plateau_stop` (``rel_tol``, ``window``, ``key``)
    would have ended the run that recorded ``history``, or ``None`` if it never fires: what the
    rule would have reported for a model that was trained past it."""
    rule = plateau_stop(rel_tol, window, key)
    if key not in history.metrics:
        raise ValueError(f"the history has no {key!r} records (it has {sorted(history.metrics)})")
    values = history.metrics[key]
    for j, step in enumerate(history.eval_steps):
        prefix = History(eval_steps=history.eval_steps[: j + 1], metrics={key: values[: j + 1]})
        if rule(prefix):
            return step
    return None


def train_on_reviews(
    params: Mapping[str, torch.Tensor],
    corpus: ReviewCorpus,
    *,
    steps: int,
    lr: float,
    trainable: tuple[str, ...] = ("E", "p", "v"),
    optimizer: str = "adam",
    eval_every: int = 10,
    rel_tol: float | None = 0.01,
    window: int = 5,
) -> History:
    """Full-batch training of the binary model on the training split of ``corpus``.

    A thin wrapper of :func:`attnbook.train.fit` with :func:`attnbook.train.binary_loss_closure`:
    at step 0, every ``eval_every`` steps and at the end it records ``train_loss``,
    ``train_accuracy``, ``test_loss``, ``test_accuracy`` and ``test_balanced_accuracy``
    (:func:`evaluate_binary`). It stops after ``steps`` steps or earlier by
    :func:`plateau_stop` with ``rel_tol`` and ``window`` (``rel_tol=None``: never early). ``params`` (``E``, ``p``,
    ``v`` on one device) are updated in place; the test split is only evaluated, never used to
    choose anything.

    When the corpus has a validation split (:func:`split_validation`) it also records
    ``val_loss``, ``val_accuracy`` and ``val_balanced_accuracy``, and the history keeps the step
    and a copy of the parameters with the lowest validation loss (``best_step``,
    ``best_params`` of :class:`~attnbook.train.History`).
    """
    E = params["E"]
    y_train = corpus.labels("train", dtype=E.dtype, device=E.device)
    y_test = corpus.labels("test", dtype=E.dtype, device=E.device)
    train, test = corpus.train.to(E.device), corpus.test.to(E.device)
    has_val = corpus.validation is not None
    if has_val:
        val = corpus.validation.to(E.device)
        y_val = corpus.labels("validation", dtype=E.dtype, device=E.device)

    def evaluate() -> dict[str, float]:
        tr = evaluate_binary(params, train, y_train)
        out = {"train_loss": tr["loss"], "train_accuracy": tr["accuracy"]}
        if has_val:
            va = evaluate_binary(params, val, y_val)
            out.update(val_loss=va["loss"], val_accuracy=va["accuracy"],
                       val_balanced_accuracy=va["balanced_accuracy"])
        te = evaluate_binary(params, test, y_test)
        out.update(test_loss=te["loss"], test_accuracy=te["accuracy"],
                   test_balanced_accuracy=te["balanced_accuracy"])
        return out

    return fit(
        params,
        binary_loss_closure(params, train, y_train),
        steps=steps,
        lr=lr,
        optimizer=optimizer,
        trainable=trainable,
        evaluate=evaluate,
        eval_every=eval_every,
        stop=None if rel_tol is None else plateau_stop(rel_tol, window),
        keep_best="val_loss" if has_val else None,
    )


def token_scores(params: Mapping[str, torch.Tensor]) -> tuple[np.ndarray, np.ndarray]:
    """``(E_s . v, E_s . p)`` for every token, as float64 NumPy arrays."""
    with torch.no_grad():
        E = params["E"]
        scores = E @ torch.stack((params["v"], params["p"]), dim=1)
        out = scores.detach().to("cpu", torch.float64).numpy()
    return out[:, 0].copy(), out[:, 1].copy()


def history_frame(history: History) -> "pd.DataFrame":
    """The evaluation records of a :class:`~attnbook.train.History` as a long DataFrame with
    columns ``step``, ``split`` (train / val / test), ``metric`` (loss / accuracy / ...) and ``value``."""
    import pandas as pd

    rows = []
    for key, values in history.metrics.items():
        split, _, metric = key.partition("_")
        for step, value in zip(history.eval_steps, values):
            rows.append({"step": step, "split": split, "metric": metric, "value": value})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- the experiment
@dataclass(frozen=True)
class ReviewExperimentConfig:
    """Settings of :func:`run_review_experiment` (see the real-data chapter for the choices).

    ``init_scale`` is the scale of the initial embeddings (rows of norm about ``init_scale``);
    ``p`` and ``v`` start with norm about one. ``eta`` is the size of the single gradient step;
    ``lr_full`` / ``steps_full`` drive the joint training of ``E, p, v`` and ``lr_head`` /
    ``steps_head`` the training of ``p, v`` alone (the two ablations). Every trained model
    stops by :func:`plateau_stop` (``rel_tol``, ``window``) or at its step cap, except the
    models named in ``run_to_cap`` (among ``"full"``, ``"random_E"``, ``"one_step_head"``),
    which ignore the plateau rule and always run to the cap; a model whose loss crawls along
    a long, slightly sloped plateau is then not ended on it (its reported step is still the
    validation minimum). ``steps_one_step_head`` is the step cap of the one-step-then-frozen
    model (``None``: ``steps_head``, the cap of the random-``E`` model).
    """

    dim: int = 2048
    init_scale: float = 0.01
    eta: float = 1000.0
    lr_full: float = 1e-3
    steps_full: int = 200
    lr_head: float = 1e-2
    steps_head: int = 600
    eval_every: int = 10
    rel_tol: float = 0.01
    window: int = 5
    optimizer: str = "adam"
    dtype: torch.dtype = torch.float32
    run_to_cap: tuple[str, ...] = ()
    steps_one_step_head: int | None = None

    def __post_init__(self) -> None:
        if self.steps_one_step_head is not None and self.steps_one_step_head < 0:
            raise ValueError(f"steps_one_step_head must be non-negative, got {self.steps_one_step_head}")
        unknown = set(self.run_to_cap) - {"full", "random_E", "one_step_head"}
        if unknown:
            raise ValueError(
                f"run_to_cap names unknown models {sorted(unknown)}; "
                "choose among 'full', 'random_E', 'one_step_head'"
            )


@dataclass
class ReviewExperiment:
    """The four models of the real-data chapter, trained on one corpus from one initialization.

    ``params[k]`` are detached parameter dictionaries for ``k`` in ``"init"`` (``E^0, p^0,
    v^0``), ``"full"`` (``E, p, v`` trained jointly), ``"random_E"`` (``E^0 / init_scale``, rows of
    norm about one, kept fixed; ``p, v`` trained), ``"one_step"`` (``E^1``, one gradient step of
    size ``eta`` on ``E`` from the initialization; ``p^0, v^0``) and ``"one_step_head"`` (``E^1``
    kept fixed; ``p, v`` trained). ``histories`` and ``seconds`` hold the training record and
    wall time of the three trained models. ``params`` are the parameters at the *end* of
    training; when the corpus has a validation split, ``best_params[k]`` and ``best_steps[k]``
    are those of the evaluation step with the lowest validation loss of each trained model.
    """

    config: ReviewExperimentConfig
    params: dict[str, dict[str, torch.Tensor]]
    histories: dict[str, History]
    seconds: dict[str, float]
    best_params: dict[str, dict[str, torch.Tensor]] = dataclasses.field(default_factory=dict)
    best_steps: dict[str, int] = dataclasses.field(default_factory=dict)


def _detached(params: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: t.detach().clone() for k, t in params.items()}


def run_review_experiment(
    corpus: ReviewCorpus,
    config: ReviewExperimentConfig,
    *,
    generator: torch.Generator,
    device: torch.device | str | None = None,
) -> ReviewExperiment:
    """Initialize once and train the four models of :class:`ReviewExperiment`.

    The initialization is :func:`attnbook.train.init_parameters` with unit scale for ``p`` and
    ``v``; ``E^0`` is the same draw multiplied by ``config.init_scale``. The single step is
    :func:`attnbook.one_step.one_gradient_step` (exact full-batch gradient of the logistic loss
    on ``corpus.train``); all training goes through :func:`train_on_reviews`.
    """
    import time

    from .one_step import one_gradient_step
    from .train import init_parameters

    init = init_parameters(
        corpus.vocab_size, config.dim, scale=1.0, generator=generator,
        dtype=config.dtype, device=device,
    )
    init = _detached(init)
    unit_E = init["E"]
    init["E"] = unit_E * config.init_scale
    y_train = corpus.labels("train", dtype=config.dtype, device=unit_E.device)
    E1 = one_gradient_step(init, corpus.train.to(unit_E.device), y_train, config.eta)

    starts = {
        "full": (init, ("E", "p", "v"), config.lr_full, config.steps_full),
        "random_E": ({**init, "E": unit_E}, ("p", "v"), config.lr_head, config.steps_head),
        "one_step_head": ({**init, "E": E1}, ("p", "v"), config.lr_head,
                          config.steps_head if config.steps_one_step_head is None else config.steps_one_step_head),
    }
    params = {"init": _detached(init), "one_step": _detached({**init, "E": E1})}
    histories: dict[str, History] = {}
    seconds: dict[str, float] = {}
    for key, (start, trainable, lr, steps) in starts.items():
        p = _detached(start)
        t0 = time.perf_counter()
        histories[key] = train_on_reviews(
            p, corpus, steps=steps, lr=lr, trainable=trainable, optimizer=config.optimizer,
            eval_every=config.eval_every,
            rel_tol=None if key in config.run_to_cap else config.rel_tol, window=config.window,
        )
        seconds[key] = time.perf_counter() - t0
        params[key] = _detached(p)
    best = {k: h for k, h in histories.items() if h.best_params is not None}
    return ReviewExperiment(
        config, params, histories, seconds,
        best_params={k: h.best_params for k, h in best.items()},
        best_steps={k: h.best_step for k, h in best.items()},
    )


# --------------------------------------------------------------------------- tables and examples
def top_tokens(
    corpus: ReviewCorpus,
    values: np.ndarray,
    k: int = 10,
    *,
    largest: bool = True,
    extra: Mapping[str, np.ndarray] | None = None,
    min_documents: int = 1,
) -> "pd.DataFrame":
    """The ``k`` tokens with the largest (or smallest) ``values`` among those in at least
    ``min_documents`` training documents, with their training document frequency and any
    ``extra`` per-token columns (for example the importance)."""
    import pandas as pd

    values = np.asarray(values, dtype=np.float64)
    if values.shape != (corpus.vocab_size,):
        raise ValueError(f"values must have shape ({corpus.vocab_size},), got {values.shape}")
    if not 1 <= k <= corpus.vocab_size:
        raise ValueError(f"k must be in [1, {corpus.vocab_size}], got {k}")
    eligible = corpus.vocabulary.document_frequency >= min_documents
    if eligible.sum() < k:
        raise ValueError(f"fewer than {k} tokens occur in {min_documents} or more documents")
    order = np.argsort(-values if largest else values, kind="stable")
    order = order[eligible[order]][:k]
    table = {
        "token": [corpus.vocabulary.tokens[i] for i in order],
        "value": values[order],
        "documents": corpus.vocabulary.document_frequency[order],
    }
    for name, col in (extra or {}).items():
        table[name] = np.asarray(col)[order]
    return pd.DataFrame(table)


def pick_examples(
    outputs: np.ndarray, labels: np.ndarray, lengths: np.ndarray, max_length: int = 80
) -> dict[str, int]:
    """Rows of three instructive short documents (at most ``max_length`` tokens): the most
    confidently correct positive, the most confidently correct negative, and the most
    confidently misclassified one. ``outputs`` are the model outputs ``f``, ``labels`` +-1."""
    f = np.asarray(outputs, dtype=np.float64)
    y = np.asarray(labels)
    short = np.asarray(lengths) <= max_length
    margin = y * f
    picks = {}
    for name, mask, score in (
        ("positive", short & (y == 1) & (margin > 0), margin),
        ("negative", short & (y == -1) & (margin > 0), margin),
        ("misclassified", short & (margin < 0), -margin),
    ):
        if not mask.any():
            raise ValueError(f"no short document qualifies as {name!r}; raise max_length")
        rows = np.flatnonzero(mask)
        picks[name] = int(rows[np.argmax(score[rows])])
    return picks
