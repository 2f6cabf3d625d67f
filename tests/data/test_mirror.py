"""The mirror builder: the original IMDB archive into the mirror's tables (offline, with
a small archive of the same layout)."""

from __future__ import annotations

import io
import tarfile

import pandas as pd
import pytest

from attnbook.data.mirror import main, write_imdb_mirror


def _archive(path, files):
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_imdb_archive_becomes_the_mirror_layout(tmp_path, small_splits):
    files = {
        "aclImdb/train/pos/10_9.txt": "great film",
        "aclImdb/train/pos/2_7.txt": "good<br />fun",
        "aclImdb/train/neg/1_1.txt": "awful",
        "aclImdb/train/unsup/3_0.txt": "not used",
        "aclImdb/test/neg/0_4.txt": "weak ü",
        "aclImdb/test/pos/0_10.txt": "superb",
        "aclImdb/README": "readme",
    }
    archive = _archive(tmp_path / "aclImdb_v1.tar.gz", files)
    assert write_imdb_mirror(archive, tmp_path / "m") == {"train": 3, "test": 2}
    train = pd.read_parquet(tmp_path / "m" / "imdb" / "train.parquet")
    assert list(train.columns) == ["text", "label", "rating", "id"]
    # negatives first, then positives, each by numeric id (2 before 10)
    assert train["id"].tolist() == [1, 2, 10]
    assert train["label"].tolist() == [0, 1, 1]
    assert train["rating"].tolist() == [1, 7, 9]
    assert train["text"].tolist() == ["awful", "good<br />fun", "great film"]
    test = pd.read_parquet(tmp_path / "m" / "imdb" / "test.parquet")
    assert test["text"].tolist() == ["weak ü", "superb"]


def test_archive_errors(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        write_imdb_mirror(tmp_path / "missing.tar.gz", tmp_path)
    only_train = _archive(tmp_path / "a.tar.gz", {"aclImdb/train/neg/0_1.txt": "x"})
    with pytest.raises(ValueError, match="no review of the test split"):
        write_imdb_mirror(only_train, tmp_path / "m")
    with pytest.raises(SystemExit):  # a usage error, not a traceback
        main([str(tmp_path / "m")])
