"""The glued output that attnbook writes is the one MyST-NB's own glue writes."""

from __future__ import annotations

import pytest

pytest.importorskip("myst_nb")
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402
from IPython.utils.capture import capture_output  # noqa: E402
from myst_nb.ext.glue import GLUE_PREFIX, glue  # noqa: E402

from attnbook.book import records  # noqa: E402


@pytest.mark.parametrize("value", [0.123456789, 7, "text", [1, 2]])
def test_glued_output_matches_myst_nb(value):
    InteractiveShell.instance()
    with capture_output() as ours:
        records._display_glued("name", value)
    with capture_output() as theirs:
        glue("name", value, display=False)
    assert records.GLUE_PREFIX == GLUE_PREFIX
    assert [(o.data, o.metadata) for o in ours.outputs] == [
        (o.data, o.metadata) for o in theirs.outputs
    ]
    assert ours.outputs, "nothing was displayed"


def test_deterministic_kernels_required():
    import torch

    from attnbook.runtime import seed_everything

    seed_everything(0)
    assert torch.are_deterministic_algorithms_enabled()
    assert not torch.is_deterministic_algorithms_warn_only_enabled()
