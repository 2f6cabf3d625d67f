"""The corpus recipe: the same IMDB and Yelp corpora from the local mirror and the hub.

The book's review corpora are defined by the local parquet mirror (see the README's
*Data* section): IMDB is the whole Large Movie Review Dataset (Maas et al., 2011),
25,000 training and 25,000 test reviews, 12,500 of each class in each split; Yelp is a
pool of 20,000 real Yelp reviews split 16,001 / 3,999, of which the loader keeps the
13,983 / 3,495 reviews with 1, 2, 4 or 5 stars (3-star reviews carry no polarity).

Where no mirror is set (Colab), :func:`attnbook.data.reviews.load_reviews` reads the
Hugging Face hub and this recipe turns the hub's data into corpora of the same kind:

IMDB (``stanfordnlp/imdb``)
    the same 50,000 reviews: the split is taken whole and must hold exactly
    :data:`IMDB_CLASS_COUNTS` reviews of each class (anything else means the hub's data
    changed, and loading stops). The hub has no star ``rating`` column; the row order
    may differ from the mirror's.
Yelp (``Yelp/yelp_review_full``)
    650,000 training and 50,000 test reviews, balanced over 1-5 stars: far more, and
    balanced differently, than the mirror. The recipe draws from each split exactly the
    mirror's number of reviews *per star* (:data:`YELP_STAR_COUNTS`), so the corpus has
    the mirror's size, star histogram and class balance (77.1 % positive). The draw
    is seeded: for split ``s`` (0 = train, 1 = test) the generator is
    ``numpy.random.default_rng([YELP_SAMPLE_SEED, s])``; for each star in ascending
    order it permutes the rows with that star (in hub order) with ``rng.permutation``
    and keeps the first ``count``; the kept rows stay in hub order. The hub's texts
    write a line break as the two characters backslash and ``n`` (the CSV escape of
    Zhang et al., 2015); the recipe turns each such escape back into a line break, as
    in the mirror's texts, so that the tokenizer does not glue ``n`` to the next word.

The reviews themselves differ between the two Yelp sources (the mirror pools two
samples of the Yelp Open Dataset, the hub's comes from the 2015 Yelp Dataset
Challenge), so numbers measured on Yelp agree between the paths in distribution, not
digit for digit; the run record of every chapter names the path it took
(:func:`attnbook.data.reviews.data_source`).
"""

from __future__ import annotations

import re
from typing import Mapping

import numpy as np

__all__ = [
    "RECIPE",
    "HUB_IDS",
    "IMDB_CLASS_COUNTS",
    "YELP_STAR_COUNTS",
    "YELP_SAMPLE_SEED",
    "known_shape",
    "verify_split",
    "IMDB_RATING_RULE",
    "imdb_label_from_rating",
    "verify_imdb_labels",
    "YELP_STARS",
    "sample_by_stars",
    "unescape_hub_text",
]

#: Name and version of this recipe, recorded with every chapter run.
RECIPE = "attnbook-reviews-1"

#: The hub datasets read when no mirror is set.
HUB_IDS = {"imdb": "stanfordnlp/imdb", "yelp": "Yelp/yelp_review_full"}

#: Reviews per class (0 = negative, 1 = positive) in each IMDB split, on both paths.
IMDB_CLASS_COUNTS: Mapping[str, Mapping[int, int]] = {
    "train": {0: 12_500, 1: 12_500},
    "test": {0: 12_500, 1: 12_500},
}

#: The stars a Yelp corpus keeps (3-star reviews have no polarity).
YELP_STARS = (1, 2, 4, 5)

#: Reviews per star in each Yelp split: the mirror's counts, drawn from the hub.
YELP_STAR_COUNTS: Mapping[str, Mapping[int, int]] = {
    "train": {1: 1_777, 2: 1_425, 4: 4_568, 5: 6_213},
    "test": {1: 444, 2: 356, 4: 1_142, 5: 1_553},
}

#: Mirror builder's command line, named in every error about a split's shape.
REBUILD = (
    "rebuild the mirror (python -m attnbook.data.mirror FOLDER --imdb-archive "
    "aclImdb_v1.tar.gz --yelp-from-hub, from a complete download) or copy its files "
    "again"
)


def known_shape(name: str, split: str) -> Mapping[int, int]:
    """What a split is known to hold: reviews per class (IMDB, 0/1) or per kept star
    (Yelp, 1/2/4/5). The one place the loader and the mirror builder take it from."""
    table = IMDB_CLASS_COUNTS if name == "imdb" else YELP_STAR_COUNTS
    return table[split]


def verify_split(name: str, split: str, values: object, where: str) -> None:
    """Refuse a split that is not whole: ``values`` are its labels (IMDB) or its kept
    stars (Yelp), one per review; their counts must be :func:`known_shape` exactly.
    Raises ``ValueError`` naming ``where``, what is wrong (one class only, rows missing
    or extra, the class balance) and how to rebuild the mirror."""
    want = {int(k): int(v) for k, v in known_shape(name, split).items()}
    keys, counts = np.unique(np.asarray(values), return_counts=True)
    found = {int(k): int(c) for k, c in zip(keys.tolist(), counts.tolist())}
    if found == want:
        return
    n, n_want = sum(found.values()), sum(want.values())
    kind = "class" if name == "imdb" else "star"
    problems = []
    if n < n_want:
        problems.append(f"{n_want - n:,} of its {n_want:,} reviews are missing")
    elif n > n_want:
        problems.append(f"it has {n - n_want:,} reviews too many (duplicated rows?)")
    positive = (lambda k: k == 1) if name == "imdb" else (lambda k: k >= 4)
    classes = {positive(k) for k, c in found.items() if c}
    if len(classes) < 2:
        problems.append("it holds one class only")
    else:
        share = sum(c for k, c in found.items() if positive(k)) / max(n, 1)
        share_want = sum(c for k, c in want.items() if positive(k)) / n_want
        problems.append(f"{share:.1%} positive, against {share_want:.1%}")
    problems.append(f"reviews per {kind}: {found}, against {want}")
    raise ValueError(
        f"{where} is not the whole {name} {split} split: "
        + "; ".join(problems)
        + f". The file is cut short, duplicated or of another corpus: {REBUILD}."
    )


#: IMDB's labelling rule (Maas et al., 2011): a review rated 7 to 10 is positive (1),
#: one rated 1 to 4 negative (0); reviews rated 5 or 6 are not in the data set.
IMDB_RATING_RULE = "rating >= 7 positive (1), rating <= 4 negative (0), 5 and 6 absent"


def imdb_label_from_rating(ratings: object) -> np.ndarray:
    """The label IMDB's rule gives each rating (:data:`IMDB_RATING_RULE`): 1, 0, or -1
    for a rating of 5 or 6, which no label fits."""
    ratings = np.asarray(ratings, dtype=np.int64)
    return np.where(ratings >= 7, 1, np.where(ratings <= 4, 0, -1)).astype(np.int64)


def verify_imdb_labels(labels: object, ratings: object, where: str) -> None:
    """Refuse IMDB rows whose label is not the one their rating fixes
    (:data:`IMDB_RATING_RULE`), every row checked. Raises ``ValueError`` naming
    ``where``, how many rows disagree, the first of them, and how to rebuild the
    mirror: the class counts of :func:`verify_split` survive labels inverted or
    shuffled among the rows, this check does not."""
    labels = np.asarray(labels, dtype=np.int64)
    ratings = np.asarray(ratings, dtype=np.int64)
    if labels.shape != ratings.shape or labels.ndim != 1:
        raise ValueError(
            f"{where}: labels {labels.shape} and ratings {ratings.shape} must be two "
            "1-D arrays of one length"
        )
    bad = np.flatnonzero(labels != imdb_label_from_rating(ratings))
    if not bad.size:
        return
    first = int(bad[0])
    raise ValueError(
        f"{where}: {bad.size:,} of its {labels.size:,} rows have a label that "
        f"disagrees with their rating ({IMDB_RATING_RULE}; first row {first}: label "
        f"{int(labels[first])}, rating {int(ratings[first])}). The labels were "
        f"inverted, shuffled among the rows or taken from another corpus: {REBUILD}."
    )


#: Seed of the Yelp draw from the hub (the mirror's own split used the same number).
YELP_SAMPLE_SEED = 20250601

_SPLIT_STREAM = {"train": 0, "test": 1}
_ESCAPED_NEWLINE = re.compile(r"\\+n")


def sample_by_stars(
    stars: object,
    counts: Mapping[int, int],
    split: str,
    seed: int = YELP_SAMPLE_SEED,
) -> np.ndarray:
    """Row numbers of the recipe's seeded draw: ``counts[k]`` rows with ``k`` stars.

    ``stars`` is the 1-D integer star column of the whole split, in hub order. Returns
    the chosen row numbers in ascending order. Raises ``ValueError`` when ``split`` is
    not ``"train"`` or ``"test"``, when a count is negative, or when the split holds
    fewer rows with some star than the count asks for.
    """
    if split not in _SPLIT_STREAM:
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    stars = np.asarray(stars)
    if stars.ndim != 1 or not np.issubdtype(stars.dtype, np.integer):
        raise ValueError(
            f"stars must be a 1-D integer array, got {stars.dtype} {stars.shape}"
        )
    rng = np.random.default_rng([int(seed), _SPLIT_STREAM[split]])
    chosen = []
    for star in sorted(counts):
        count = int(counts[star])
        if count < 0:
            raise ValueError(f"counts[{star}] must be >= 0, got {count}")
        rows = np.flatnonzero(stars == star)
        if rows.size < count:
            raise ValueError(
                f"the {split} split has {rows.size} reviews with {star} stars; the "
                f"recipe {RECIPE} draws {count}"
            )
        chosen.append(rows[rng.permutation(rows.size)[:count]])
    if not chosen:
        return np.zeros(0, dtype=np.int64)
    return np.sort(np.concatenate(chosen)).astype(np.int64)


def unescape_hub_text(text: str) -> str:
    """``text`` with each escaped line break (backslashes then ``n``) made a line
    break."""
    return _ESCAPED_NEWLINE.sub("\n", text)
