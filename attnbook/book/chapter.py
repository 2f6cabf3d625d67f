"""The start of every chapter, in one line, and gluing a mapping of numbers at once."""

from __future__ import annotations

import warnings
from typing import Mapping, NamedTuple

import numpy as np
import torch

from attnbook.book import plotting
from attnbook.book.records import glue, note_seed, start_record
from attnbook.runtime import device_for, seed_everything

__all__ = ["ChapterStart", "start_chapter", "glue_all"]


class ChapterStart(NamedTuple):
    """What a chapter starts with: its NumPy generator and the device it computes on."""

    rng: np.random.Generator
    device: torch.device


def start_chapter(name: str, *, seed: int, workload: str = "real") -> ChapterStart:
    """Start chapter ``name`` (its notebook's stem): a fresh record, every generator
    seeded with ``seed``, the figure style; returns ``(rng, device)``, the device chosen
    by ``workload`` (:func:`attnbook.runtime.device_for`).
    """
    device = device_for(workload)  # an unknown workload fails before anything starts
    # tqdm (imported by datasets) warns that ipywidgets is absent: noise in the pages
    warnings.filterwarnings("ignore", message="IProgress not found")
    start_record(name)
    rng = seed_everything(seed)
    note_seed(seed)  # the chapter's record lists its seed
    plotting.setup()
    return ChapterStart(rng, device)


def glue_all(
    values: Mapping[str, object], *, prefix: str = "", volatile: bool = False
) -> None:
    """:func:`~attnbook.book.records.glue` every ``key: value`` of ``values`` as
    ``prefix + key``."""
    for key, value in values.items():
        glue(f"{prefix}{key}", value, volatile=volatile)
