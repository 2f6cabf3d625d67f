"""Data that is whole or refused: the mirror builder reads an archive to its end and
the loader verifies every split against what the data set is known to hold
(attnbook.validation.known_shape); a cut, truncated, duplicated or one-class split is
an error naming the file and what is wrong. The known shapes are shrunk to a few
reviews here, so that the archives stay tiny."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from attnbook import validation
from attnbook.data.mirror import write_imdb_mirror
from attnbook.data.reviews import DATA_DIR_ENV, load_reviews
from attnbook.validation import known_shape, verify_split


@pytest.fixture
def tiny_shapes(monkeypatch):
    """IMDB known to hold 2 reviews of each class per split; Yelp 1 per star."""
    for split in ("train", "test"):
        monkeypatch.setitem(validation.IMDB_CLASS_COUNTS, split, {0: 2, 1: 2})
        monkeypatch.setitem(
            validation.YELP_STAR_COUNTS, split, {1: 1, 2: 1, 4: 1, 5: 1}
        )


def _members():
    return {
        f"aclImdb/{split}/{side}/{i}_{rating}.txt": f"{split} {side} review {i}"
        for split in ("train", "test")
        for side, rating in (("neg", 2), ("pos", 9))
        for i in range(2)
    }


def _tar(path, files, mode="w:gz"):
    with tarfile.open(path, mode) as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_a_whole_archive_is_written(tmp_path, tiny_shapes):
    archive = _tar(tmp_path / "a.tar.gz", _members())
    assert write_imdb_mirror(archive, tmp_path / "m") == {"train": 4, "test": 4}


def test_an_archive_cut_at_a_member_boundary_is_refused(tmp_path, tiny_shapes):
    """An uncompressed tar cut after its first members (a partial download that
    tarfile reads without complaint): the missing reviews are named, nothing is
    written."""
    whole = _tar(tmp_path / "whole.tar", _members(), mode="w")
    data = whole.read_bytes()
    cut = tmp_path / "cut.tar"
    cut.write_bytes(data[: 512 * 2 * 6])  # six members of one header and one block
    with pytest.raises(ValueError, match="test split of .*cut.tar is not the whole"):
        write_imdb_mirror(cut, tmp_path / "m")
    assert not (tmp_path / "m").exists()


def test_a_compressed_archive_cut_short_is_refused(tmp_path, tiny_shapes):
    data = _tar(tmp_path / "a.tar.gz", _members()).read_bytes()
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="cut short or damaged.*download it again"):
        write_imdb_mirror(cut, tmp_path / "m")


def test_a_split_of_one_class_is_refused(tmp_path, tiny_shapes):
    files = {k: v for k, v in _members().items() if "/test/pos/" not in k}
    with pytest.raises(
        ValueError, match="2 of its 4 reviews are missing; it holds one"
    ):
        write_imdb_mirror(_tar(tmp_path / "a.tar.gz", files), tmp_path / "m")


def test_a_review_twice_in_the_archive_is_refused(tmp_path, tiny_shapes):
    members = list(_members().items())
    archive = _tar(tmp_path / "a.tar.gz", dict(members))
    with tarfile.open(archive, "r:gz") as tar:  # the same member appended again
        extra = {m.name: tar.extractfile(m).read().decode() for m in tar}
    twice = tmp_path / "twice.tar"
    with tarfile.open(twice, "w") as tar:
        for name, text in [*extra.items(), members[0]]:
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
    with pytest.raises(ValueError, match="occurs twice"):
        write_imdb_mirror(twice, tmp_path / "m")


def _mirror(tmp_path, monkeypatch, name, split, frame):
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    (tmp_path / name).mkdir(exist_ok=True)
    path = tmp_path / name / f"{split}.parquet"
    frame.to_parquet(path)
    return path


@pytest.mark.parametrize(
    "labels, message",
    [
        ([1, 1, 1, 1], "it holds one class only"),
        ([0, 1, 1], "1 of its 4 reviews are missing; 66.7% positive, against 50.0%"),
        ([0, 0, 1, 1, 1], "1 reviews too many"),
        ([0, 1, 1, 1], "75.0% positive, against 50.0%"),
    ],
    ids=["one-class", "cut", "duplicated", "balance"],
)
def test_the_loader_refuses_a_split_that_is_not_whole(
    tmp_path, monkeypatch, tiny_shapes, labels, message
):
    frame = pd.DataFrame({"text": [f"r{i}" for i in labels], "label": labels})
    path = _mirror(tmp_path, monkeypatch, "imdb", "test", frame)
    with pytest.raises(ValueError, match=message) as err:
        load_reviews("imdb", "test")
    assert str(path) in str(err.value) and "rebuild the mirror" in str(err.value)


def test_a_yelp_split_short_of_a_star_is_refused(tmp_path, monkeypatch, tiny_shapes):
    frame = pd.DataFrame({"text": list("abcd"), "stars": [1, 3, 4, 5]})
    _mirror(tmp_path, monkeypatch, "yelp", "train", frame)
    with pytest.raises(ValueError, match=r"reviews per star: \{1: 1, 4: 1, 5: 1\}"):
        load_reviews("yelp", "train")
    frame = pd.DataFrame({"text": list("abcde"), "stars": [1, 2, 3, 4, 5]})
    _mirror(tmp_path, monkeypatch, "yelp", "train", frame)
    assert load_reviews("yelp", "train")["stars"] == [1, 2, 4, 5]  # 3 stars dropped


@pytest.mark.skipif(not os.environ.get(DATA_DIR_ENV), reason=f"needs {DATA_DIR_ENV}")
def test_the_real_mirror_cut_to_40_reviews_of_one_class_is_refused(
    tmp_path, monkeypatch
):
    """The fault as it happens: 40 reviews of one class where 25,000 belong."""
    real = pd.read_parquet(os.path.join(os.environ[DATA_DIR_ENV], "imdb/test.parquet"))
    assert len(real) == sum(known_shape("imdb", "test").values())
    _mirror(tmp_path, monkeypatch, "imdb", "test", real[real.label == 0].head(40))
    with pytest.raises(ValueError, match="24,960 of its 25,000 reviews are missing"):
        load_reviews("imdb", "test")


def test_verify_split_accepts_the_known_shape():
    verify_split("imdb", "train", [0] * 12_500 + [1] * 12_500, "here")
    counts = known_shape("yelp", "test")
    verify_split("yelp", "test", [s for s, c in counts.items() for _ in range(c)], "x")


def test_the_readme_lists_the_known_shapes():
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    for name, label in (("imdb", "IMDB"), ("yelp", "Yelp")):
        for split in ("train", "test"):
            shape = known_shape(name, split)
            row = f"| {label} | {split} | {sum(shape.values()):,} |"
            assert row in readme, row
            for count in shape.values():
                assert f"{count:,}" in readme.split(row)[1].split("\n")[0]


# ------------------------------------------- IMDB's labels checked against its ratings
def _rated(labels, ratings):
    return pd.DataFrame(
        {
            "text": [f"r{i}" for i in range(len(labels))],
            "label": labels,
            "rating": ratings,
        }
    )


@pytest.mark.parametrize(
    "labels, ratings, count, first",
    [
        ([1, 1, 0, 0], [2, 3, 8, 10], 4, "first row 0: label 1, rating 2"),
        ([0, 1, 0, 1], [1, 2, 9, 7], 2, "first row 1: label 1, rating 2"),
        ([0, 0, 1, 1], [4, 5, 7, 8], 1, "first row 1: label 0, rating 5"),
    ],
    ids=["inverted", "shuffled", "neutral-rating"],
)
def test_labels_that_disagree_with_the_ratings_are_refused(
    tmp_path, monkeypatch, tiny_shapes, labels, ratings, count, first
):
    """Class counts kept (the shape check passes), labels wrong: refused with the
    file, how many rows disagree and the first of them."""
    path = _mirror(tmp_path, monkeypatch, "imdb", "train", _rated(labels, ratings))
    with pytest.raises(ValueError) as err:
        load_reviews("imdb", "train")
    message = str(err.value)
    assert str(path) in message and "rebuild the mirror" in message
    assert f"{count:,} of its 4 rows have a label that disagrees" in message
    assert first in message


def test_labels_that_agree_with_the_ratings_load(tmp_path, monkeypatch, tiny_shapes):
    _mirror(tmp_path, monkeypatch, "imdb", "train", _rated([0, 0, 1, 1], [1, 4, 7, 10]))
    assert load_reviews("imdb", "train")["rating"] == [1, 4, 7, 10]


def test_an_archive_whose_folder_disagrees_with_the_rating_is_refused(
    tmp_path, tiny_shapes
):
    files = dict(_members())
    files["aclImdb/train/pos/1_3.txt"] = files.pop("aclImdb/train/pos/1_9.txt")
    with pytest.raises(ValueError, match="1 of its 4 rows have a label that disagrees"):
        write_imdb_mirror(_tar(tmp_path / "a.tar.gz", files), tmp_path / "m")
    assert not (tmp_path / "m").exists()


@pytest.mark.skipif(not os.environ.get(DATA_DIR_ENV), reason=f"needs {DATA_DIR_ENV}")
@pytest.mark.parametrize("fault", ["inverted", "shuffled"])
def test_the_real_mirror_relabelled_is_refused(tmp_path, monkeypatch, fault):
    """The fault as it happens: the whole IMDB test split with its labels inverted, or
    shuffled among the rows (the class counts kept), every row checked."""
    real = pd.read_parquet(os.path.join(os.environ[DATA_DIR_ENV], "imdb/test.parquet"))
    labels = real.label.to_numpy()
    if fault == "inverted":
        real["label"] = 1 - labels
        wrong = len(real)
    else:
        real["label"] = np.random.default_rng(0).permutation(labels)
        wrong = int((real.label.to_numpy() != labels).sum())
    path = _mirror(tmp_path, monkeypatch, "imdb", "test", real)
    with pytest.raises(ValueError, match=f"{wrong:,} of its 25,000 rows") as err:
        load_reviews("imdb", "test")
    assert str(path) in str(err.value)
