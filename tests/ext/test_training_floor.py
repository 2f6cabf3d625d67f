"""scripts/training_floor.py counts every optimizer step with the bytes it must move."""

import sys
from collections import Counter
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import training_floor  # noqa: E402  (scripts/ is on sys.path)


def test_each_step_counts_its_tensors_and_moments():
    from attnbook.engine import fused

    ledger: Counter = Counter()
    stop = training_floor.count_steps(ledger)
    E = torch.zeros(5, 3, requires_grad=True)
    opt = torch.optim.Adam([E], lr=0.1)
    E.grad = torch.ones(5, 3)
    opt.step()
    assert ledger == Counter({"adam updates": 1, "bytes": 2 * 3 * 15 * 4})
    sgd = torch.optim.SGD([E], lr=0.1)
    sgd.step()
    assert ledger["gd updates"] == 1 and ledger["bytes"] == 2 * 3 * 60 + 2 * 60
    G, P = torch.ones(5, 2), torch.ones(2, 3)
    fused.fused_step(E.detach(), G, P, lr=0.1, moments=fused.AdamMoments.zeros_like(E))
    assert ledger["adam updates"] == 2 and ledger["bytes"] == 2 * 3 * 60 * 2 + 2 * 60
    stop()
    opt.step()
    assert ledger["adam updates"] == 2
