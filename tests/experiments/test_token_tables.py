import os

import numpy as np
import pytest
import torch

from attnbook.book.display import highlight_html
from attnbook.data.corpus import (
    build_review_corpus,
    min_df_for_vocabulary_size,
    prepare_reviews,
    split_validation,
)
from attnbook.data.reviews import DATA_DIR_ENV
from attnbook.experiments.evaluation import evaluate_binary
from attnbook.experiments.real_data import (
    ReviewExperimentConfig,
    history_frame,
    run_review_experiment,
    token_scores,
    train_on_reviews,
)
from attnbook.experiments.token_tables import pick_examples, top_tokens
from attnbook.models.parameters import init_parameters
from attnbook.models.training import History, plateau_stop, plateau_stop_step

TRAIN = [
    "Good film, good cast.",
    "A bad film.",
    "good but bad",
    "zzz",
    "Great fun!",
    "bad bad",
]
TRAIN_Y = [1, 0, 1, 0, 1, 0]
TEST = ["qqq", "bad ending", "good good film"]
TEST_Y = [1, 0, 1]


def test_build_review_corpus_alignment():
    c = build_review_corpus(
        TRAIN,
        TRAIN_Y,
        TEST,
        TEST_Y,
        min_df=2,
        name="toy",
        train_stars=[9, 2, 7, 1, 8, 1],
        test_stars=[10, 3, 8],
    )
    assert c.vocabulary.tokens == ("bad", "film", "good")  # document frequency 3, 2, 2
    assert c.vocab_size == 3
    # "zzz" and "Great fun!" have no in-vocabulary token in train, "qqq" in test
    assert c.train_kept.tolist() == [0, 1, 2, 5] and c.test_kept.tolist() == [1, 2]
    assert c.n_dropped_documents == {"train": 2, "test": 1}
    assert c.train_labels.tolist() == [1, -1, 1, -1]
    assert c.test_labels.tolist() == [-1, 1]
    assert c.train_stars.tolist() == [9, 2, 7, 1] and c.test_stars.tolist() == [3, 8]
    assert c.test_texts == ("bad ending", "good good film")
    assert c.train.n_sequences == 4 and c.test.n_sequences == 2
    assert c.n_tokens == {"train": 15, "test": 6}
    assert c.n_dropped_tokens == {"train": 6, "test": 2}
    assert c.positive_fraction["train"] == 0.5
    y = c.labels("test", dtype=torch.float64)
    assert y.dtype == torch.float64 and y.tolist() == [-1.0, 1.0]
    s = c.summary()
    assert s["vocab_size"] == 3 and s["dropped_train_documents"] == 2


def test_build_review_corpus_errors():
    with pytest.raises(ValueError, match="0 \\(negative\\) or 1"):
        build_review_corpus(TRAIN, [1, -1, 1, 0, 1, 0], TEST, TEST_Y, min_df=1)
    with pytest.raises(ValueError, match="differ in length"):
        build_review_corpus(TRAIN, TRAIN_Y[:3], TEST, TEST_Y, min_df=1)
    with pytest.raises(ValueError, match="train_stars"):
        build_review_corpus(TRAIN, TRAIN_Y, TEST, TEST_Y, min_df=1, train_stars=[1, 2])
    with pytest.raises(ValueError, match="single class"):
        build_review_corpus(TRAIN, [1] * 6, TEST, TEST_Y, min_df=1)
    with pytest.raises(ValueError, match="split"):
        build_review_corpus(TRAIN, TRAIN_Y, TEST, TEST_Y, min_df=1).labels("dev")


def test_highlight_html():
    c = build_review_corpus(TRAIN, TRAIN_Y, TEST, TEST_Y, min_df=2)
    w = np.zeros(c.vocab_size)
    w[c.vocabulary.id("good")] = 0.5
    w[c.vocabulary.id("bad")] = 0.25
    out = highlight_html("Good <b>& bad</b><br />odd", c.vocabulary, w)
    assert "rgba(42,157,143,1.000)" in out and "rgba(42,157,143,0.500)" in out
    assert ">Good</span>" in out and "&lt;b&gt;&amp;" in out and "<br>" in out
    assert "odd" in out and out.count("<span") == 2
    short = highlight_html("good " * 50, c.vocabulary, w, max_chars=20)
    assert short.count("<span") <= 4 and "…" in short
    with pytest.raises(ValueError, match="finite"):
        highlight_html("good", c.vocabulary, -w)


@pytest.mark.skipif(not os.environ.get(DATA_DIR_ENV), reason=f"needs {DATA_DIR_ENV}")
def test_prepare_yelp_from_mirror():
    c = prepare_reviews("yelp", min_df=10)
    assert c.n_documents == {"train": 13_983, "test": 3_495}
    assert 5_000 < c.vocab_size < 8_000
    assert 0.7 < c.positive_fraction["train"] < 0.8
    assert set(np.unique(c.train_stars)) <= {1, 2, 4, 5}
    assert np.all((c.train_stars >= 4) == (c.train_labels == 1))
    assert len(c.test_texts) == c.test.n_sequences


# ---------------------------------------------------------- training helpers and tables


def _toy_corpus():
    pos = ["good great fun", "great good", "fun good film", "good film great"]
    neg = ["bad awful film", "awful bad", "bad boring film", "boring awful"]
    texts = pos + neg
    labels = [1] * 4 + [0] * 4
    return build_review_corpus(
        texts, labels, texts[::-1], labels[::-1], min_df=1, name="toy"
    )


def test_min_df_for_vocabulary_size():
    texts = ["a b c", "a b", "a"]
    best, sizes = min_df_for_vocabulary_size(texts, 2, candidates=(1, 2, 3))
    assert sizes == {1: 3, 2: 2, 3: 1} and best == 2
    with pytest.raises(ValueError):
        min_df_for_vocabulary_size(texts, 0)


def test_plateau_stop():
    h = History()
    stop = plateau_stop(0.1, window=2)
    for step, loss in enumerate([1.0, 0.5, 0.3]):
        h.record(step, {"train_loss": loss})
    assert not stop(h)  # fell by 70% over the last two evaluations
    h.record(3, {"train_loss": 0.29})
    h.record(4, {"train_loss": 0.285})
    assert stop(h)  # 0.3 -> 0.285 is a 5% decrease
    with pytest.raises(ValueError):
        plateau_stop(0.0)
    with pytest.raises(ValueError):
        plateau_stop(0.1, window=0)


def test_plateau_stop_step():
    h = History()
    for step, loss in zip((0, 10, 20, 30, 40), (1.0, 0.5, 0.3, 0.29, 0.285)):
        h.record(step, {"train_loss": loss})
    assert (
        plateau_stop_step(h, 0.1, window=2) == 40
    )  # as test_plateau_stop: fires at the fifth record
    assert plateau_stop_step(h, 0.01, window=2) is None
    with pytest.raises(ValueError):
        plateau_stop_step(h, 0.1, key="val_loss")


def test_train_on_reviews_and_evaluate():
    c = _toy_corpus()
    gen = torch.Generator().manual_seed(0)
    params = {
        k: t.detach()
        for k, t in init_parameters(c.vocab_size, 16, generator=gen).items()
    }
    h = train_on_reviews(params, c, steps=60, lr=0.05, eval_every=10, rel_tol=None)
    assert h.eval_steps[0] == 0 and h.eval_steps[-1] == 60
    assert set(h.metrics) == {
        "train_loss",
        "train_accuracy",
        "test_loss",
        "test_accuracy",
        "test_balanced_accuracy",
    }
    assert h.metrics["train_loss"][-1] < 0.1 * h.metrics["train_loss"][0]
    ev = evaluate_binary(params, c.test, c.labels("test"))
    assert ev["accuracy"] == 1.0 and ev["balanced_accuracy"] == 1.0
    frame = history_frame(h)
    assert set(frame["split"]) == {"train", "test"} and "balanced_accuracy" in set(
        frame["metric"]
    )
    value, cls = token_scores(params)
    assert value.shape == cls.shape == (c.vocab_size,)
    good, bad = c.vocabulary.id("good"), c.vocabulary.id("bad")
    assert value[good] > 0 > value[bad]


def test_run_review_experiment_small():
    c = _toy_corpus()
    cfg = ReviewExperimentConfig(
        dim=8, eta=10.0, steps_full=20, steps_head=20, dtype=torch.float64
    )
    ex = run_review_experiment(c, cfg, generator=torch.Generator().manual_seed(1))
    assert set(ex.params) == {"init", "full", "random_E", "one_step", "one_step_head"}
    # random E is the initial draw at unit scale, fixed; the one-step E is kept fixed
    # too
    torch.testing.assert_close(
        ex.params["random_E"]["E"], ex.params["init"]["E"] / cfg.init_scale
    )
    torch.testing.assert_close(
        ex.params["one_step_head"]["E"], ex.params["one_step"]["E"]
    )
    assert not torch.equal(ex.params["one_step"]["E"], ex.params["init"]["E"])
    assert set(ex.histories) == set(ex.seconds) == {"full", "random_E", "one_step_head"}
    again = run_review_experiment(c, cfg, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(again.params["full"]["E"], ex.params["full"]["E"])


def test_run_review_experiment_run_to_cap():
    c = _toy_corpus()
    # a loose plateau rule stops every model early, except those told to run to the cap
    cfg = ReviewExperimentConfig(
        dim=8,
        eta=10.0,
        steps_full=60,
        steps_head=60,
        rel_tol=0.9,
        window=1,
        dtype=torch.float64,
        run_to_cap=("one_step_head",),
        steps_one_step_head=70,
    )
    ex = run_review_experiment(c, cfg, generator=torch.Generator().manual_seed(1))
    assert ex.histories["one_step_head"].eval_steps[-1] == 70
    assert ex.histories["one_step_head"].stopped_at is None
    assert (
        ex.histories["random_E"].stopped_at is not None
        and ex.histories["random_E"].stopped_at < 60
    )
    with pytest.raises(ValueError):
        ReviewExperimentConfig(run_to_cap=("one_step",))
    with pytest.raises(ValueError):
        ReviewExperimentConfig(steps_one_step_head=-1)


def _larger_toy_corpus():
    pos = [
        f"good great fun {w}"
        for w in ("film", "plot", "cast", "score", "music", "story")
    ] * 3
    neg = [f"bad awful boring {w}" for w in ("film", "plot", "cast", "score")] * 3
    texts = pos + neg
    labels = [1] * len(pos) + [0] * len(neg)
    return build_review_corpus(
        texts,
        labels,
        texts[:6],
        labels[:6],
        min_df=1,
        name="toy",
        train_stars=[5] * len(pos) + [1] * len(neg),
    )


def test_split_validation_stratified_and_seeded():
    c = _larger_toy_corpus()  # 18 positive, 12 negative
    s = split_validation(c, 0.2, np.random.default_rng(0))
    assert s.validation.n_sequences == 4 + 2 and s.train.n_sequences == 30 - 6
    assert (s.validation_labels == 1).sum() == 4 and (
        s.validation_labels == -1
    ).sum() == 2
    # the two parts partition the original training rows, each in the original order
    assert (
        sorted(np.concatenate([s.train_kept, s.validation_kept]).tolist())
        == c.train_kept.tolist()
    )
    assert (np.diff(s.train_kept) > 0).all() and (np.diff(s.validation_kept) > 0).all()
    torch.testing.assert_close(
        s.validation.to_dense(), c.train.select(s.validation_kept).to_dense()
    )
    assert s.train_stars.shape == (24,) and s.vocabulary is c.vocabulary
    assert (
        s.summary()["n_validation"] == 6
        and s.n_dropped_documents == c.n_dropped_documents
    )
    assert s.labels("validation").shape == (6,)
    again = split_validation(c, 0.2, np.random.default_rng(0))
    assert again.validation_kept.tolist() == s.validation_kept.tolist()
    with pytest.raises(ValueError, match="no validation"):
        c.labels("validation")
    with pytest.raises(ValueError):
        split_validation(c, 1.0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="already"):
        split_validation(s, 0.2, np.random.default_rng(0))


def test_training_with_validation_keeps_best_step():
    c = split_validation(_larger_toy_corpus(), 0.2, np.random.default_rng(1))
    gen = torch.Generator().manual_seed(0)
    params = {
        k: t.detach()
        for k, t in init_parameters(c.vocab_size, 16, generator=gen).items()
    }
    h = train_on_reviews(params, c, steps=30, lr=0.05, eval_every=10, rel_tol=None)
    assert {"val_loss", "val_accuracy", "val_balanced_accuracy"} <= set(h.metrics)
    i = int(np.argmin(h.metrics["val_loss"]))
    assert h.best_step == h.eval_steps[i] and set(h.best_params) == {"E", "p", "v"}
    assert set(history_frame(h)["split"]) == {"train", "val", "test"}
    cfg = ReviewExperimentConfig(
        dim=8, eta=10.0, steps_full=20, steps_head=20, dtype=torch.float64
    )
    ex = run_review_experiment(c, cfg, generator=torch.Generator().manual_seed(1))
    assert (
        set(ex.best_steps)
        == set(ex.best_params)
        == {"full", "random_E", "one_step_head"}
    )
    for key, step in ex.best_steps.items():
        assert step == ex.histories[key].best_step


def test_top_tokens_and_pick_examples():
    c = _toy_corpus()
    vals = np.arange(c.vocab_size, dtype=float)
    t = top_tokens(c, vals, 2, extra={"x": -vals})
    assert t["value"].tolist() == [c.vocab_size - 1, c.vocab_size - 2]
    assert t["x"].tolist() == [-(c.vocab_size - 1), -(c.vocab_size - 2)]
    b = top_tokens(c, vals, 1, largest=False, min_documents=3)
    assert b["documents"].iloc[0] >= 3
    with pytest.raises(ValueError):
        top_tokens(c, vals[:-1], 2)
    f = np.array([2.0, -1.0, 0.5, 3.0, -2.5])
    y = np.array([1, -1, -1, 1, -1])
    picks = pick_examples(f, y, np.array([5, 5, 5, 50, 5]), max_length=10)
    assert picks == {"positive": 0, "negative": 4, "misclassified": 2}
    with pytest.raises(ValueError, match="misclassified"):
        pick_examples(f[:2], y[:2], np.array([1, 1]))


def test_document_outcomes_and_paired_difference():
    from attnbook.experiments.evaluation import (
        document_outcomes,
        paired_mean_difference,
    )

    c = _toy_corpus()
    gen = torch.Generator().manual_seed(3)
    params = {
        k: t.detach()
        for k, t in init_parameters(c.vocab_size, 8, generator=gen).items()
    }
    out = document_outcomes(params, c.test, c.labels("test"))
    ev = evaluate_binary(params, c.test, c.labels("test"))
    assert out["loss"].shape == out["correct"].shape == (c.test.n_sequences,)
    assert np.isclose(out["loss"].mean(), ev["loss"], rtol=1e-5)
    assert np.isclose(out["correct"].mean(), ev["accuracy"])
    rng = np.random.default_rng(0)
    shared = rng.normal(size=4000)  # large shared part: the paired interval ignores it
    d = paired_mean_difference(shared + 0.1 + 0.01 * rng.normal(size=4000), shared)
    assert (
        d["low"] < 0.1 < d["high"] and d["high"] - d["low"] < 0.002 and d["n"] == 4000
    )
    with pytest.raises(ValueError):
        paired_mean_difference([1.0, 2.0], [1.0])
    with pytest.raises(ValueError):
        paired_mean_difference([1.0, 2.0], [1.0, 0.0], level=1.0)
