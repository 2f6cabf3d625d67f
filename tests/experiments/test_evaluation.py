"""Loss and accuracy of the one-layer model on a corpus, against the
per-document outcomes computed by hand."""

import numpy as np
import torch

from attnbook.data.corpus import build_review_corpus
from attnbook.experiments.curves import evaluate_binary
from attnbook.models.attention import attention_output
from attnbook.models.parameters import init_parameters


def test_evaluate_binary_is_the_mean_of_the_per_document_outcomes():
    pos = ["good great fun", "great good", "fun good film", "good film great"]
    neg = ["bad awful film", "awful bad", "bad boring film", "boring awful"]
    texts, labels = pos + neg, [1] * 4 + [0] * 4
    c = build_review_corpus(texts, labels, texts[::-1], labels[::-1], min_df=1)
    gen = torch.Generator().manual_seed(3)
    params = {
        k: t.detach()
        for k, t in init_parameters(c.vocab_size, 8, generator=gen).items()
    }
    y = c.labels("test")
    ev = evaluate_binary(params, c.test, y)
    with torch.no_grad():
        f = attention_output(params["E"], params["p"], params["v"], c.test)
    margin = (y * f).double().numpy()
    correct = margin > 0
    assert np.isclose(ev["loss"], np.logaddexp(0.0, -margin).mean(), rtol=1e-5)
    assert ev["accuracy"] == correct.mean()
