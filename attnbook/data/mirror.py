"""Build the local mirror of the review data (``ATTNBOOK_DATA_DIR``) on any machine:
IMDB from the original archive (it holds the star ratings the hub lacks), Yelp from the
hub's sample of the recipe. Command line (the GitHub Pages workflow uses it)::

    python -m attnbook.data.mirror DIR --imdb-archive aclImdb_v1.tar.gz --yelp-from-hub
"""

from __future__ import annotations

import argparse
import os
import re
import tarfile
import zlib
from pathlib import Path
from typing import Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from attnbook.data.reviews import DATA_DIR_ENV, load_reviews
from attnbook.validation import verify_split

_MEMBER = re.compile(r"(?:^|/)aclImdb/(train|test)/(neg|pos)/(\d+)_(\d+)\.txt$")


def _read_imdb_archive(archive: Path) -> dict[str, list[tuple[int, int, int, str]]]:
    """The reviews of the archive per split: ``(label, id, rating, text)``."""
    rows: dict[str, list[tuple[int, int, int, str]]] = {"train": [], "test": []}
    seen = set()
    try:
        with tarfile.open(archive, "r:*") as tar:
            for member in tar:
                m = _MEMBER.search(member.name)
                if not (m and member.isfile()):
                    continue
                split, side, ident, rating = m.groups()
                if not 1 <= int(rating) <= 10:
                    raise ValueError(f"{member.name}: rating {rating} outside 1-10")
                if (split, side, ident) in seen:
                    raise ValueError(
                        f"{archive}: review {split}/{side}/{ident} occurs twice"
                    )
                seen.add((split, side, ident))
                text = tar.extractfile(member).read().decode("utf-8")
                rows[split].append((int(side == "pos"), int(ident), int(rating), text))
    except (tarfile.TarError, EOFError, zlib.error, OSError) as err:
        raise ValueError(
            f"{archive} is cut short or damaged ({type(err).__name__}: {err}); "
            "download it again"
        ) from err
    return rows


def write_imdb_mirror(archive: str | Path, folder: str | Path) -> dict[str, int]:
    """Write ``<folder>/imdb/{train,test}.parquet`` from the aclImdb archive (columns
    ``text, label, rating, id``; negatives then positives, by id); return the rows per
    split. ``ValueError`` for an archive damaged, incomplete or with bad rows."""
    archive, out = Path(archive), Path(folder) / "imdb"
    if not archive.is_file():
        raise ValueError(f"archive {archive} does not exist")
    rows = _read_imdb_archive(archive)
    for split, found in rows.items():
        if not found:
            raise ValueError(f"{archive} holds no review of the {split} split")
    for split, found in rows.items():
        labels, ratings = [r[0] for r in found], [r[2] for r in found]
        verify_split("imdb", split, labels, f"the {split} split of {archive}", ratings)
    out.mkdir(parents=True, exist_ok=True)
    for split, found in rows.items():
        found.sort(key=lambda r: (r[0], r[1]))
        label, ident, rating, text = zip(*found)
        columns = {"label": label, "rating": rating, "id": ident}
        table = pa.table(
            {"text": text, **{k: pa.array(v, pa.int64()) for k, v in columns.items()}}
        )
        pq.write_table(table, out / f"{split}.parquet")
    return {split: len(found) for split, found in rows.items()}


def write_yelp_mirror(folder: str | Path) -> dict[str, int]:
    """Write ``<folder>/yelp/{train,test}.parquet`` from the hub's Yelp sample (needs
    the hub: ``ATTNBOOK_DATA_DIR`` unset); return the rows per split."""
    if DATA_DIR_ENV in os.environ:
        raise ValueError(f"unset {DATA_DIR_ENV}: the Yelp sample comes from the hub")
    out = Path(folder) / "yelp"
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    for split in ("train", "test"):
        data = load_reviews("yelp", split)
        table = pa.table(
            {
                "text": list(data["text"]),
                **{k: pa.array(list(data[k]), pa.int64()) for k in ("label", "stars")},
            }
        )
        pq.write_table(table, out / f"{split}.parquet")
        written[split] = table.num_rows
    return written


def main(argv: Sequence[str] | None = None) -> dict[str, dict[str, int]]:
    """Command line: build the mirror in a folder."""
    ap = argparse.ArgumentParser(
        prog="python -m attnbook.data.mirror",
        description="Build the review data mirror.",
    )
    ap.add_argument(
        "folder", help="the mirror folder (then set ATTNBOOK_DATA_DIR to it)"
    )
    ap.add_argument("--imdb-archive", help="path of aclImdb_v1.tar.gz")
    ap.add_argument(
        "--yelp-from-hub", action="store_true", help="write the Yelp sample"
    )
    args = ap.parse_args(argv)
    if not args.imdb_archive and not args.yelp_from_hub:
        ap.error("nothing to do: give --imdb-archive and/or --yelp-from-hub")
    done = {}
    try:
        if args.imdb_archive:
            done["imdb"] = write_imdb_mirror(args.imdb_archive, args.folder)
        if args.yelp_from_hub:
            done["yelp"] = write_yelp_mirror(args.folder)
    except ValueError as err:
        ap.error(str(err))
    print(f"mirror written to {args.folder}: {done}")
    return done


if __name__ == "__main__":
    main()
