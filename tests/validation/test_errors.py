"""Bad input gets a ValueError whose message says what is wrong and, where it can, what
to do.

One table of (call, expected message) for the public functions of the model, the counts,
the losses, the theory's frequency, training, synthetic data, seeding and reporting;
then the data loader's failures (no network and no mirror, a damaged or incomplete
parquet file, a wrong name or split), whose messages must name the two ways to get the
data. Cases already covered in ``tests/data/test_reviews.py`` are extended here, not
repeated.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from attnbook.book import checks
from attnbook.book import records as report
from attnbook.data.reviews import (
    DATA_DIR_ENV,
    DatasetUnavailableError,
    Vocabulary,
    load_reviews,
)
from attnbook.data.synthetic import SyntheticSpec, sample_sequences
from attnbook.engine.counts import TokenCounts
from attnbook.models.attention import (
    attention_output,
    attention_weights,
    dense_attention_output,
)
from attnbook.models.losses import logistic_loss
from attnbook.models.multiclass import as_class_labels, multiclass_output
from attnbook.models.parameters import init_parameters
from attnbook.models.training import fit
from attnbook.runtime import seed_everything
from attnbook.theory.frequency import average_signed_frequency
from attnbook.validation import as_signed_labels, check_parameters

F64 = torch.float64
E = torch.zeros(5, 3, dtype=F64)
p = torch.zeros(3, dtype=F64)
v = torch.zeros(3, dtype=F64)
SEQS = [np.array([0, 1]), np.array([4])]
I64 = lambda *xs: torch.tensor(xs, dtype=torch.int64)  # noqa: E731

CASES = {
    # parameters of the model
    "E not a tensor": (
        lambda: attention_output(E.numpy(), p, v, SEQS),
        "E must be a torch tensor",
    ),
    "integer E": (
        lambda: attention_output(E.long(), p, v, SEQS),
        "use torch.float32 or",
    ),
    "E 1-D": (lambda: attention_output(p, p, v, SEQS), r"shape \(V, d\)"),
    "E with no columns": (
        lambda: check_parameters(torch.zeros(5, 0, dtype=F64), p[:0], v[:0]),
        r"V, d > 0",
    ),
    "p of wrong length": (
        lambda: attention_output(E, p[:2], v, SEQS),
        r"p must have shape \(3,\)",
    ),
    "v of wrong length": (
        lambda: dense_attention_output(E, p, v[:1], SEQS),
        r"v must have shape \(3,\)",
    ),
    "mixed dtypes": (
        lambda: attention_output(E, p.float(), v, SEQS),
        "share one dtype",
    ),
    "weights: bad E": (lambda: attention_weights(E[0], p, [0]), r"shape \(V, d\)"),
    # sequences
    "sequences an array": (
        lambda: attention_output(E, p, v, np.array([[0, 1]])),
        "list of 1-D integer arrays",
    ),
    "no sequences": (lambda: attention_output(E, p, v, []), "sequences is empty"),
    "empty sequence": (
        lambda: attention_output(E, p, v, [np.array([], dtype=int)]),
        "sequence 0 is empty",
    ),
    "token id too large": (
        lambda: attention_output(E, p, v, [np.array([0, 5])]),
        r"token id 5, outside the vocabulary \[0, 5\)",
    ),
    "negative token id": (
        lambda: dense_attention_output(E, p, v, [np.array([-1])]),
        "token id -1",
    ),
    "float token ids": (
        lambda: attention_output(E, p, v, [np.array([0.5])]),
        "token ids must be integers",
    ),
    "float tensor ids": (
        lambda: attention_output(E, p, v, [torch.tensor([0.0])]),
        "token ids must be integers",
    ),
    "2-D sequence": (
        lambda: TokenCounts.from_sequences([np.zeros((2, 2), dtype=int)], 5),
        "must be 1-D",
    ),
    "vocab size zero": (
        lambda: TokenCounts.from_sequences(SEQS, 0),
        "vocab_size must be positive",
    ),
    "counts for another vocabulary": (
        lambda: attention_output(
            E, p, v, TokenCounts.from_sequences([np.array([7])], 8)
        ),
        "vocabulary|vocab",
    ),
    # TokenCounts invariants
    "counts: float indptr": (
        lambda: TokenCounts(torch.zeros(2), I64(0), I64(1), 3),
        "1-D int64 tensor",
    ),
    "counts: no sequence": (
        lambda: TokenCounts(I64(0), I64(), I64(), 3),
        "at least one sequence",
    ),
    "counts: lengths differ": (
        lambda: TokenCounts(I64(0, 1), I64(0), I64(1, 1), 3),
        "same length",
    ),
    "counts: bad indptr": (
        lambda: TokenCounts(I64(1, 1), I64(0), I64(1), 3),
        "start at 0",
    ),
    "counts: empty row": (
        lambda: TokenCounts(I64(0, 0, 1), I64(0), I64(1), 3),
        "empty row",
    ),
    "counts: id outside": (
        lambda: TokenCounts(I64(0, 1), I64(3), I64(1), 3),
        r"\[0, 3\)",
    ),
    "counts: zero count": (
        lambda: TokenCounts(I64(0, 1), I64(0), I64(0), 3),
        "positive",
    ),
    # labels and losses
    "labels 0/1": (lambda: as_signed_labels([0, 1]), r"2\*y - 1"),
    "labels as text": (lambda: as_signed_labels(["pos", "neg"]), "numbers in"),
    "labels 2-D": (lambda: as_signed_labels(np.ones((2, 2))), "1-D"),
    "no labels": (lambda: as_signed_labels([]), "empty"),
    "labels count": (
        lambda: as_signed_labels([1, -1, 1], n=2),
        "3 labels for 2 sequences",
    ),
    "loss shapes": (
        lambda: logistic_loss(torch.zeros(3), torch.ones(2)),
        "differ in shape",
    ),
    "alpha labels 0/1": (
        lambda: average_signed_frequency(SEQS, [0, 1], 5),
        r"2\*y - 1",
    ),
    "alpha label count": (
        lambda: average_signed_frequency(SEQS, [1], 5),
        "1 labels for 2",
    ),
    "class ids out of range": (lambda: as_class_labels([0, 3], 3), r"\[0, 3\)"),
    "float class ids": (
        lambda: as_class_labels(np.array([0.0, 1.0]), 3),
        "integer class ids",
    ),
    "class id count": (lambda: as_class_labels([0, 1], 3, n=3), "2 labels for 3"),
    "multiclass W 1-D": (lambda: multiclass_output(E, p, v, SEQS), r"\(d, K\)"),
    "multiclass W rows": (
        lambda: multiclass_output(E, p, torch.zeros(2, 2, dtype=F64), SEQS),
        "must have shape|must be",
    ),
    # training
    "init: zero vocabulary": (lambda: init_parameters(0, 3), "must be positive"),
    "init: zero scale": (
        lambda: init_parameters(3, 3, scale=0.0),
        "scale must be positive",
    ),
    "fit: negative steps": (
        lambda: fit(
            {"p": p.clone().requires_grad_()}, lambda: p.sum(), steps=-1, lr=0.1
        ),
        "non-negative",
    ),
    "fit: unknown optimizer": (
        lambda: fit(
            {"p": p.clone().requires_grad_()},
            lambda: p.sum(),
            steps=1,
            lr=0.1,
            optimizer="sgdm",
        ),
        "one of",
    ),
    "fit: unknown trainable": (
        lambda: fit(
            {"p": p.clone().requires_grad_()},
            lambda: p.sum(),
            steps=1,
            lr=0.1,
            trainable=("q",),
        ),
        "unknown trainable",
    ),
    # synthetic data
    "spec: negative block": (lambda: SyntheticSpec(n_positive=-1), "non-negative"),
    "spec: empty vocabulary": (
        lambda: SyntheticSpec(n_positive=0, n_negative=0, n_neutral=0),
        "vocabulary is empty",
    ),
    "spec: lengths": (
        lambda: SyntheticSpec(min_len=5, max_len=4),
        "min_len <= max_len",
    ),
    "spec: rates": (
        lambda: SyntheticSpec(relevant_rate=0.8, opposite_rate=0.5),
        "relevant_rate \\+ opposite_rate <= 1",
    ),
    "spec: class fraction": (
        lambda: SyntheticSpec(positive_fraction=1.0),
        "strictly between",
    ),
    "sample: n zero": (
        lambda: sample_sequences(SyntheticSpec(), 0, np.random.default_rng(0)),
        "n must be positive",
    ),
    # vocabulary
    "vocabulary: min_df 0": (lambda: Vocabulary.build(["a"], 0), "at least 1"),
    "vocabulary: no texts": (lambda: Vocabulary.build([], 1), "no texts"),
    "vocabulary: too rare": (
        lambda: Vocabulary.build(["a", "b"], 2),
        "no token occurs in 2",
    ),
    "encode: no texts": (lambda: Vocabulary.build(["a"], 1).encode([]), "no texts"),
    "encode: nothing known": (
        lambda: Vocabulary.build(["a"], 1).encode(["zzz"]),
        "drop_empty=True",
    ),
    # seeding and threads
    "negative seed": (lambda: seed_everything(-1), "non-negative integer"),
    "float seed": (lambda: seed_everything(1.5), "non-negative integer"),
    # reporting
    "chapter without name": (lambda: report.start_record(""), "non-empty string"),
    "chapter as a path": (
        lambda: report.start_record("chapters/01_setup"),
        "without folders",
    ),
    "glue without name": (lambda: report.glue("", 1.0), "non-empty string"),
    "check: relation": (
        lambda: checks.check("x", 1.0, 0.0, "=="),
        "relation must be one of",
    ),
    "check: NaN value": (lambda: checks.check("x", float("nan"), 0.0), "not finite"),
    "check: infinite threshold": (
        lambda: checks.check("x", 1.0, float("inf")),
        "threshold",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_gets_a_helpful_value_error(case):
    call, message = CASES[case]
    with pytest.raises(ValueError, match=message):
        call()


def test_count_of_error_cases():
    assert len(CASES) >= 60


# ---------------------------------------------------------------------- the data loader
def _says_what_to_do(err: BaseException, name: str) -> None:
    text = str(err)
    assert DATA_DIR_ENV in text and "hub" in text, text
    assert f"{name}/train.parquet" in text, text


def test_no_network_and_no_mirror_says_what_to_do(offline_without_mirror):
    with pytest.raises(DatasetUnavailableError) as info:
        load_reviews("yelp", "train")
    _says_what_to_do(info.value, "yelp")
    assert "Yelp/yelp_review_full" in str(info.value)


def test_missing_mirror_file_says_what_to_do(monkeypatch, tmp_path):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    (tmp_path / "yelp").mkdir()
    with pytest.raises(
        DatasetUnavailableError, match="has no file yelp/test.parquet"
    ) as info:
        load_reviews("yelp", "test")
    _says_what_to_do(info.value, "yelp")


@pytest.mark.parametrize("content", [b"", b"PAR1 truncated", b"\x00" * 64])
def test_damaged_parquet_says_replace_it(monkeypatch, tmp_path, content):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    (tmp_path / "imdb").mkdir()
    (tmp_path / "imdb" / "test.parquet").write_bytes(content)
    with pytest.raises(
        DatasetUnavailableError, match="Replace it with a fresh copy"
    ) as info:
        load_reviews("imdb", "test")
    _says_what_to_do(info.value, "imdb")


def test_truncated_real_parquet(monkeypatch, tmp_path):
    """A parquet file cut short (an interrupted download) is reported as damaged."""
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    (tmp_path / "imdb").mkdir()
    path = tmp_path / "imdb" / "train.parquet"
    pd.DataFrame({"text": ["good film"] * 50, "label": [1] * 50}).to_parquet(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(DatasetUnavailableError, match="damaged"):
        load_reviews("imdb", "train")


def test_parquet_without_the_columns(monkeypatch, tmp_path):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    (tmp_path / "imdb").mkdir()
    pd.DataFrame({"review": ["good"], "sentiment": [1]}).to_parquet(
        tmp_path / "imdb" / "train.parquet"
    )
    with pytest.raises(
        DatasetUnavailableError, match=r"lacks the columns \['label', 'text'\]"
    ):
        load_reviews("imdb", "train")


@pytest.mark.parametrize(
    "name, split, message",
    [
        ("IMDB", "train", r"unknown dataset 'IMDB'; choose one of \('imdb', 'yelp'\)"),
        ("sst2", "train", "unknown dataset"),
        (
            "imdb",
            "valid",
            r"unknown split 'valid' for 'imdb'; choose one of \('train', 'test'\)",
        ),
        ("yelp", "unsupervised", "unknown split"),
    ],
)
def test_wrong_name_or_split_lists_the_choices(name, split, message):
    with pytest.raises(ValueError, match=message):
        load_reviews(name, split)


def test_a_small_valid_mirror_loads(monkeypatch, tmp_path, small_splits):
    """The loader's success path on a mirror it did not ship: Yelp stars become
    polarity."""
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    (tmp_path / "yelp").mkdir()
    pd.DataFrame(
        {"text": ["a", "b", "c", "d"], "stars": [1, 3, 4, 5], "label": [0, 2, 3, 4]}
    ).to_parquet(tmp_path / "yelp" / "test.parquet")
    ds = load_reviews("yelp", "test")
    assert ds["stars"] == [1, 4, 5] and ds["label"] == [0, 1, 1]
