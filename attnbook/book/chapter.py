"""The start of every chapter, in one line, and gluing a mapping of numbers at once."""

from __future__ import annotations

import warnings
from typing import Mapping

import numpy as np
import torch

from attnbook.book import plotting
from attnbook.book.records import glue, note_seed, start_record
from attnbook.runtime import device_for, seed_everything


def start_chapter(
    name: str, *, seed: int, workload: str = "real"
) -> tuple[np.random.Generator, torch.device]:
    """Start chapter ``name``: a fresh record, every generator seeded with ``seed``,
    the figure style; returns ``(rng, device)`` for ``workload``."""
    device = device_for(workload)  # an unknown workload fails before anything starts
    # tqdm (imported by datasets) warns that ipywidgets is absent: noise in the pages
    warnings.filterwarnings("ignore", message="IProgress not found")
    start_record(name)
    rng = seed_everything(seed)
    note_seed(seed)  # the chapter's record lists its seed
    plotting.setup()
    return rng, device


def glue_all(
    values: Mapping[str, object], *, prefix: str = "", volatile: bool = False
) -> None:
    """Glue every ``key: value`` of ``values`` as ``prefix + key``."""
    for key, value in values.items():
        glue(f"{prefix}{key}", value, volatile=volatile)
