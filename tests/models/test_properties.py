"""Property-based tests (hypothesis) of the model and of the theory's closed forms.

Each property is an identity of the model that holds for *every* input, so hypothesis
draws random vocabularies, dimensions, sequences, parameters and labels and checks it to
rounding error (float64). Sizes stay small so the whole file runs in seconds.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from attnbook.engine.counts import TokenCounts
from attnbook.models.attention import (
    attention_output,
    attention_weights,
    dense_attention_output,
)
from attnbook.models.losses import accuracy, logistic_loss
from attnbook.models.multiclass import multiclass_output
from attnbook.theory.frequency import average_signed_frequency

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TOL = dict(rtol=1e-10, atol=1e-10)


@st.composite
def problems(
    draw, max_vocab: int = 12, max_dim: int = 6, max_n: int = 6, max_len: int = 8
):
    """A random problem: E (V, d), p, v (d,), sequences over [0, V), labels +-1
    (float64)."""
    V = draw(st.integers(1, max_vocab))
    d = draw(st.integers(1, max_dim))
    n = draw(st.integers(1, max_n))
    seqs = [
        np.array(draw(st.lists(st.integers(0, V - 1), min_size=1, max_size=max_len)))
        for _ in range(n)
    ]
    y = np.array(draw(st.lists(st.sampled_from([-1, 1]), min_size=n, max_size=n)))
    seed = draw(st.integers(0, 2**32 - 1))
    scale = draw(st.sampled_from([0.1, 1.0, 3.0]))
    gen = np.random.default_rng(seed)
    E = torch.from_numpy(gen.normal(scale=scale, size=(V, d)))
    p = torch.from_numpy(gen.normal(scale=scale, size=d))
    v = torch.from_numpy(gen.normal(size=d))
    return E, p, v, seqs, y, gen


def close(a, b, **kw):
    torch.testing.assert_close(torch.as_tensor(a), torch.as_tensor(b), **(kw or TOL))


# --------------------------------------------------------------------------- the model
@SETTINGS
@given(problems())
def test_engines_agree(prob):
    """The count engine and the padded dense reference give the same outputs."""
    E, p, v, seqs, _, _ = prob
    close(attention_output(E, p, v, seqs), dense_attention_output(E, p, v, seqs))


@SETTINGS
@given(problems())
def test_engines_agree_on_gradients(prob):
    """... and the same gradients with respect to E, p and v."""
    E, p, v, seqs, y, _ = prob
    grads = []
    for fn in (attention_output, dense_attention_output):
        leaves = [t.clone().requires_grad_(True) for t in (E, p, v)]
        logistic_loss(fn(*leaves, seqs), torch.from_numpy(y).double()).backward()
        grads.append([t.grad for t in leaves])
    for a, b in zip(*grads):
        close(a, b)


@SETTINGS
@given(problems(), st.randoms(use_true_random=False))
def test_permutation_invariance(prob, rnd):
    """No positional encoding: shuffling the tokens of a sequence leaves f unchanged."""
    E, p, v, seqs, _, _ = prob
    shuffled = [np.array(rnd.sample(list(s), len(s))) for s in seqs]
    close(attention_output(E, p, v, seqs), attention_output(E, p, v, shuffled))
    close(
        dense_attention_output(E, p, v, seqs), dense_attention_output(E, p, v, shuffled)
    )


@SETTINGS
@given(problems(), st.integers(2, 4))
def test_only_frequencies_matter(prob, k):
    """Repeating a sequence k times keeps every token frequency n_s / T, hence f."""
    E, p, v, seqs, _, _ = prob
    close(
        attention_output(E, p, v, seqs),
        attention_output(E, p, v, [np.tile(s, k) for s in seqs]),
    )


@SETTINGS
@given(problems(), st.floats(-50, 50))
def test_constant_score_shift_invariance(prob, c):
    """Adding the same constant c to every score p.E_s (an extra embedding coordinate
    equal to one, with p's extra coordinate c and v's zero) does not change the softmax,
    hence f."""
    E, p, v, seqs, _, _ = prob
    one = torch.ones(E.shape[0], 1, dtype=E.dtype)
    E2 = torch.cat([E, one], dim=1)
    p2 = torch.cat([p, torch.tensor([c], dtype=p.dtype)])
    v2 = torch.cat([v, torch.zeros(1, dtype=v.dtype)])
    close(
        attention_output(E2, p2, v2, seqs),
        attention_output(E, p, v, seqs),
        rtol=1e-9,
        atol=1e-9,
    )
    close(
        dense_attention_output(E2, p2, v2, seqs),
        attention_output(E, p, v, seqs),
        rtol=1e-9,
        atol=1e-9,
    )


@SETTINGS
@given(problems(), st.floats(-3, 3), st.floats(-3, 3))
def test_linear_in_the_head(prob, a, b):
    """f is linear in v: f(a v1 + b v2) = a f(v1) + b f(v2)."""
    E, p, v, seqs, _, gen = prob
    w = torch.from_numpy(gen.normal(size=v.shape[0]))
    lhs = attention_output(E, p, a * v + b * w, seqs)
    rhs = a * attention_output(E, p, v, seqs) + b * attention_output(E, p, w, seqs)
    close(lhs, rhs, rtol=1e-9, atol=1e-9)


@SETTINGS
@given(problems())
def test_output_is_a_convex_combination(prob):
    """f(X) lies between the smallest and largest value score E_s.v of X's tokens."""
    E, p, v, seqs, _, _ = prob
    f = attention_output(E, p, v, seqs)
    values = E @ v
    for i, s in enumerate(seqs):
        assert values[s].min() - 1e-12 <= f[i] <= values[s].max() + 1e-12


@SETTINGS
@given(problems())
def test_zero_query_is_the_average(prob):
    """With p = 0 the attention is uniform: f(X) is the mean of E_{x_i}.v over
    positions."""
    E, _, v, seqs, _, _ = prob
    f = attention_output(E, torch.zeros_like(v), v, seqs)
    close(f, torch.stack([(E[torch.from_numpy(s)] @ v).mean() for s in seqs]))


@SETTINGS
@given(problems())
def test_attention_weights_are_distributions(prob):
    """Per-position weights sum to one."""
    E, p, _, seqs, _, _ = prob
    for s in seqs:
        w = attention_weights(E, p, s)
        close(w.sum(), torch.tensor(1.0, dtype=w.dtype))


@SETTINGS
@given(problems(), st.integers(1, 4))
def test_multiclass_columns_are_binary_models(prob, K):
    """Column k of the K-class output is the binary model with head W[:, k]."""
    E, p, v, seqs, _, gen = prob
    W = torch.from_numpy(gen.normal(size=(v.shape[0], K)))
    out = multiclass_output(E, p, W, seqs)
    for k in range(K):
        close(out[:, k], attention_output(E, p, W[:, k].contiguous(), seqs))


@SETTINGS
@given(problems())
def test_counts_round_trip(prob):
    """TokenCounts keeps the multiset of every sequence."""
    E, _, _, seqs, _, _ = prob
    counts = TokenCounts.from_sequences(seqs, E.shape[0])
    assert [sorted(s.tolist()) for s in counts.to_sequences()] == [
        sorted(s.tolist()) for s in seqs
    ]
    assert counts.lengths.tolist() == [s.size for s in seqs]
    # counts and sequences give the same output
    close(
        attention_output(E, torch.zeros_like(E[0]), E[0], counts),
        attention_output(E, torch.zeros_like(E[0]), E[0], seqs),
    )


# --------------------------------------------------------------------------- the loss
@SETTINGS
@given(
    st.lists(st.floats(-30, 30), min_size=1, max_size=20),
    st.randoms(use_true_random=False),
)
def test_logistic_loss_symmetry_and_bounds(fs, rnd):
    f = torch.tensor(fs, dtype=torch.float64)
    y = torch.tensor([rnd.choice([-1.0, 1.0]) for _ in fs], dtype=torch.float64)
    loss = logistic_loss(f, y)
    close(loss, logistic_loss(-f, -y))
    assert loss >= 0
    close(
        logistic_loss(torch.zeros_like(f), y),
        torch.tensor(math.log(2), dtype=torch.float64),
    )
    assert 0.0 <= accuracy(f, y) <= 1.0


# --------------------------------------------------------------------------- the theory
@SETTINGS
@given(problems())
def test_alpha_is_odd_and_sums_to_mean_label(prob):
    """alpha(-y) = -alpha(y), and sum_s alpha_s = mean(y) because sum_s n_s(X)/T = 1."""
    E, _, _, seqs, y, _ = prob
    V = E.shape[0]
    alpha = average_signed_frequency(seqs, y, V)
    close(average_signed_frequency(seqs, -y, V), -alpha)
    close(alpha.sum(), torch.tensor(y.mean(), dtype=torch.float64))
    assert bool((alpha.abs() <= 1 + 1e-12).all())


@SETTINGS
@given(problems(), problems())
def test_alpha_is_linear_in_the_data(a, b):
    """alpha of the union of two data sets is the size-weighted mean of their alphas
    (alpha is linear in the per-sequence terms y_i n_s(X_i) / T_i)."""
    seqs_a, y_a = a[3], a[4]
    seqs_b, y_b = b[3], b[4]
    V = max(a[0].shape[0], b[0].shape[0])
    na, nb = len(seqs_a), len(seqs_b)
    union = average_signed_frequency(seqs_a + seqs_b, np.concatenate([y_a, y_b]), V)
    mix = (
        na * average_signed_frequency(seqs_a, y_a, V)
        + nb * average_signed_frequency(seqs_b, y_b, V)
    ) / (na + nb)
    close(union, mix)


@SETTINGS
@given(problems())
def test_alpha_is_the_gradient_of_the_loss_at_zero(prob):
    """At E.v = 0 and p = 0, dL/d(E_s.v) = -(1/2) alpha_s: the one-step statement's
    core.

    With p = 0, f(X) = sum_s (n_s/T) b_s with b_s = E_s.v, and dL/df = -y/2 at f = 0.
    """
    E, _, _, seqs, y, _ = prob
    V = E.shape[0]
    b = torch.zeros(V, dtype=torch.float64, requires_grad=True)
    # a model whose value scores are b: E = identity rows, v = b, p = 0
    eye = torch.eye(V, dtype=torch.float64)
    f = attention_output(eye, torch.zeros(V, dtype=torch.float64), b, seqs)
    logistic_loss(f, torch.from_numpy(y).double()).backward()
    close(b.grad, -0.5 * average_signed_frequency(seqs, y, V))


@settings(max_examples=15, deadline=None, derandomize=True, database=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 5))
def test_attention_concentrates_as_p_grows(seed, n_tokens):
    """If p.E_s has a unique maximiser in X, the softmax tends to one on it as ||p||
    grows."""
    gen = np.random.default_rng(seed)
    V, d = n_tokens, n_tokens
    E = torch.from_numpy(gen.normal(size=(V, d)))
    p = torch.from_numpy(gen.normal(size=d))
    seq = np.arange(V)
    scores = (E @ p).numpy()
    gap = np.sort(scores)[-1] - np.sort(scores)[-2]
    assume(gap > 1e-3)
    star = int(np.argmax(scores))
    for scale in (1.0, 10.0, 1e3 / gap):
        w = attention_weights(E, scale * p, seq)
        bound = (V - 1) * math.exp(-scale * gap)  # 1 - w_star <= sum of the others
        assert 1.0 - float(w[star]) <= bound + 1e-12


@pytest.mark.parametrize("scale", [1e2, 1e4])
def test_huge_p_stays_finite(scale):
    """The count engine shifts the softmax: a very long p gives finite, correct
    outputs."""
    gen = np.random.default_rng(0)
    E = torch.from_numpy(gen.normal(size=(20, 5)))
    p = torch.from_numpy(gen.normal(size=5)) * scale
    v = torch.from_numpy(gen.normal(size=5))
    seqs = [gen.integers(0, 20, size=7) for _ in range(5)]
    f = attention_output(E, p, v, seqs)
    assert torch.isfinite(f).all()
    close(f, dense_attention_output(E, p, v, seqs))


# --------------------------------------------------------------------------- max-margin
@st.composite
def separable_selections(draw):
    """E with linearly independent rows (V <= d) and sequences that each select their
    token of highest rank under one global ranking: such a selection is always
    separable."""
    V = draw(st.integers(2, 6))
    d = V + draw(st.integers(0, 3))
    n = draw(st.integers(1, 5))
    gen = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    E = gen.normal(size=(V, d))
    rank = gen.permutation(V)
    seqs, selected = [], []
    for _ in range(n):
        distinct = gen.choice(V, size=draw(st.integers(2, V)), replace=False)
        seq = np.concatenate(
            [distinct, gen.choice(distinct, size=draw(st.integers(0, 4)))]
        )
        seqs.append(gen.permutation(seq))
        selected.append(int(distinct[np.argmax(rank[distinct])]))
    return E, seqs, selected, gen


MM_SETTINGS = settings(
    max_examples=15,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


@MM_SETTINGS
@given(separable_selections())
def test_max_margin_kkt(problem):
    """p_mm is feasible (margins >= 1), a non-negative combination of the constraint
    rows, and only tight constraints carry weight (complementary slackness)."""
    from attnbook.theory.max_margin import max_margin_solution

    E, seqs, selected, _ = problem
    sol = max_margin_solution(torch.from_numpy(E), seqs, selected)
    assert sol.margins.min() >= 1 - 1e-6
    np.testing.assert_allclose(sol.differences.T @ sol.dual, sol.p, atol=1e-6)
    assert (sol.dual >= 0).all()
    assert np.all(sol.dual * (sol.margins - 1) <= 1e-6)


@MM_SETTINGS
@given(separable_selections(), st.sampled_from([0.5, 3.0]))
def test_max_margin_equivariance(problem, c):
    """Scaling E by c scales p_mm by 1/c; rotating E's columns by Q rotates p_mm by Q;
    the order of the sequences and of the tokens inside them does not matter."""
    from attnbook.theory.max_margin import max_margin_solution

    E, seqs, selected, gen = problem
    base = max_margin_solution(torch.from_numpy(E), seqs, selected).p
    np.testing.assert_allclose(
        max_margin_solution(torch.from_numpy(c * E), seqs, selected).p,
        base / c,
        atol=1e-6,
    )
    Q, _ = np.linalg.qr(gen.normal(size=(E.shape[1], E.shape[1])))
    np.testing.assert_allclose(
        max_margin_solution(torch.from_numpy(E @ Q), seqs, selected).p,
        Q.T @ base,
        atol=1e-6,
    )
    order = gen.permutation(len(seqs))
    shuffled = [gen.permutation(seqs[i]) for i in order]
    np.testing.assert_allclose(
        max_margin_solution(
            torch.from_numpy(E), shuffled, [selected[i] for i in order]
        ).p,
        base,
        atol=1e-6,
    )


# --------------------------------------------------------------------------- bad input
_junk_token = st.one_of(
    st.integers(-3, 12),
    st.floats(allow_nan=True),
    st.booleans(),
    st.text(max_size=2),
    st.none(),
)
_junk_sequence = st.one_of(
    st.lists(_junk_token, max_size=5),
    st.lists(st.lists(st.integers(0, 5), max_size=3), max_size=3),
    st.integers(),
    st.text(max_size=3),
)


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(st.one_of(st.lists(_junk_sequence, max_size=4), _junk_sequence, st.none()))
def test_any_input_either_works_or_raises_value_error(sequences):
    """Whatever is passed as sequences, the model either computes (valid input) or
    raises a ValueError; never an IndexError, TypeError or a silent wrong answer."""
    E, p, v = (
        torch.ones(10, 2, dtype=torch.float64),
        torch.ones(2, dtype=torch.float64),
        torch.ones(2, dtype=torch.float64),
    )
    for fn in (attention_output, dense_attention_output):
        try:
            out = fn(E, p, v, sequences)
        except ValueError:
            continue
        assert out.shape == (len(sequences),)
        torch.testing.assert_close(out, torch.full_like(out, 2.0))  # every E_s.v is 2
