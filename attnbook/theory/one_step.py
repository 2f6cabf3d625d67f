"""One exact gradient step on the embeddings, binary and K-class model (chapter 2), the
lemma's initialization and the Pearson correlation its noise model predicts."""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np
import torch

from attnbook.engine.counts import TokenCounts, as_token_counts, token_counts_over
from attnbook.engine.segments import RowTerms
from attnbook.models.attention import count_heads_output
from attnbook.models.losses import logistic_loss
from attnbook.models.multiclass import as_class_labels, cross_entropy_loss
from attnbook.validation import (
    ArgumentTypeError,
    as_signed_labels,
    check_count,
    check_finite,
    check_finite_real,
    check_finite_scores,
    check_float_dtype,
    check_float_tensor,
    check_head_matrix,
    check_parameters,
    check_positive_real,
)

__all__ = [
    "one_step_coefficients",
    "one_gradient_step",
    "one_gradient_step_multiclass",
    "class_signed_frequency",
    "predicted_class_alignment",
    "init_one_step",
    "predicted_pearson",
    "pearson",
]


def _params(params: Mapping[str, torch.Tensor], head: str) -> tuple[torch.Tensor, ...]:
    if not isinstance(params, Mapping) or {"E", "p", head} - set(params):
        raise ArgumentTypeError(f"params must be a mapping with 'E', 'p', {head!r}")
    E, p, W = params["E"], params["p"], params[head]
    if head == "W":
        check_head_matrix(W, E)
    check_parameters(E, p, W if head == "v" else W[:, 0])
    return E.detach(), p.detach(), W.detach()


def _binary_data(E: torch.Tensor, counts: object, labels: object) -> tuple:
    counts = token_counts_over(counts, E.shape[0]).to(E.device)
    y = as_signed_labels(labels, counts.n_sequences, dtype=E.dtype).to(E.device)
    return counts, y  # on E's device, labels +-1 in E's dtype


def one_step_coefficients(
    E: torch.Tensor, p: torch.Tensor, v: torch.Tensor, counts: object, labels: object
) -> tuple[torch.Tensor, torch.Tensor]:
    """The exact ``(c_v, c_p)``, each ``(V,)``, of ``-grad_E L = c_v v^T + c_p p^T`` for
    the logistic loss of the binary model at ``(E, p, v)``."""
    check_parameters(E, p, v)
    E, p, v = E.detach(), p.detach(), v.detach()
    return _coefficients(E, p, v, *_binary_data(E, counts, labels))


def _coefficients(
    E: torch.Tensor,
    p: torch.Tensor,
    v: torch.Tensor,
    counts: TokenCounts,
    y: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    scores = E @ torch.stack((p, v), dim=1)
    check_finite_scores(scores, E=E, p=p, v=v)
    terms = RowTerms(scores[:, 0], scores[:, 1:], counts)
    rows, tok, pi = terms.rows, terms.tokens, terms.pi
    b_tok = terms.B[tok, 0]
    f = torch.zeros_like(terms.gap[:, 0]).index_add(0, rows, pi * b_tok)
    g = y * torch.sigmoid(-y * f)  # minus the derivative of the loss in f
    weight = g[rows] * pi / counts.n_sequences
    zeros = torch.zeros(E.shape[0], dtype=E.dtype, device=E.device)
    c_v = zeros.index_add(0, tok, weight)
    # b_s - f_i relative to the row's top token: accurate once attention is one-hot
    c_p = zeros.index_add(0, tok, weight * (terms.db[:, 0] - terms.gap[rows, 0]))
    return c_v, c_p


def one_gradient_step(
    params: Mapping[str, torch.Tensor],
    counts: object,
    labels: object,
    eta: float,
    *,
    method: str = "closed_form",
) -> torch.Tensor:
    """``E - eta grad_E L`` (binary model, a new ``(V, d)``), by the rank-two formula
    or by ``method="autograd"``."""
    eta = check_positive_real(eta, "step size eta")
    E, p, v = _params(params, "v")
    if method not in ("closed_form", "autograd"):
        raise ValueError(f"method must be 'closed_form' or 'autograd', got {method!r}")
    counts, y = _binary_data(E, counts, labels)
    if method == "closed_form":
        c_v, c_p = _coefficients(E, p, v, counts, y)
        return E + eta * (c_v[:, None] * v[None, :] + c_p[:, None] * p[None, :])
    E_var = E.clone().requires_grad_(True)
    f = count_heads_output(E_var, p, v[:, None], counts, check_input=False)[:, 0]
    (grad,) = torch.autograd.grad(logistic_loss(f, y, check_input=False), E_var)
    return (E - eta * grad).detach()


def one_gradient_step_multiclass(
    params: Mapping[str, torch.Tensor], counts: object, labels: object, eta: float
) -> torch.Tensor:
    """``E - eta grad_E L`` for the K-class model (head ``params["W"]`` ``(d, K)``)."""
    eta = check_positive_real(eta, "step size eta")
    E, p, W = _params(params, "W")
    counts = token_counts_over(counts, E.shape[0]).to(E.device)
    y = as_class_labels(labels, W.shape[1], counts.n_sequences).to(E.device)
    E_var = E.clone().requires_grad_(True)
    scores = count_heads_output(E_var, p, W, counts, check_input=False)
    loss = cross_entropy_loss(scores, y, check_input=False)
    (grad,) = torch.autograd.grad(loss, E_var)
    return (E - eta * grad).detach()


def class_signed_frequency(
    counts: object, labels: object, n_classes: int, vocab_size: int
) -> torch.Tensor:
    """``(V, K)`` float64: ``gamma_sk = (1/n) sum_i (n_s(X_i) / T_i) (1{y_i = k} -
    1/K)``."""
    K = check_count(n_classes, "n_classes", minimum=2)
    counts = as_token_counts(counts, vocab_size).to("cpu")
    n, rows = counts.n_sequences, counts.row_ids
    y = as_class_labels(labels, K, n)
    share = counts.counts.to(torch.float64) / counts.lengths.to(torch.float64)[rows]
    target = torch.full((n, K), -1.0 / K, dtype=torch.float64)
    target[torch.arange(n), y] += 1.0
    gamma = torch.zeros(vocab_size, K, dtype=torch.float64)
    gamma.index_add_(0, counts.token_ids, share[:, None] * target[rows])
    return gamma / n


def predicted_class_alignment(
    gamma: torch.Tensor, W: torch.Tensor, eta: float, *, cross_terms: bool = True
) -> torch.Tensor:
    """The prediction ``(V, K)`` of ``E_s . v_k`` after one step: ``eta gamma W^T W``,
    or without ``cross_terms`` ``eta gamma_sk ||v_k||^2``."""
    eta = check_positive_real(eta, "step size eta")
    gamma, W = check_float_tensor(gamma, "gamma"), check_float_tensor(W, "W")
    if gamma.ndim != 2 or W.ndim != 2 or gamma.shape[1] != W.shape[1]:
        raise ValueError("gamma must be (V, K) and W must be (d, K) with the same K")
    check_finite(gamma=gamma, W=W)
    gamma = gamma.to(W.dtype).to(W.device)
    gram = W.T @ W
    if not cross_terms:
        gram = torch.diag(torch.diagonal(gram))
    return eta * gamma @ gram


def init_one_step(
    vocab_size: int,
    dim: int,
    *,
    init_scale: float,
    cls_scale: float = 1.0,
    head_scale: float = 1.0,
    n_classes: int | None = None,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> dict[str, torch.Tensor]:
    """``E``, ``p`` and ``v`` (or ``W`` (d, K) for ``n_classes = K``) with stds
    ``init_scale``, ``cls_scale`` and ``head_scale`` over ``sqrt(d)``, no gradients."""
    check_positive_real(init_scale, "init_scale")
    check_positive_real(head_scale, "head_scale")
    if check_finite_real(cls_scale, "cls_scale") < 0:
        raise ValueError(f"cls_scale must be non-negative, got {cls_scale}")
    V, d = check_count(vocab_size, "vocab_size"), check_count(dim, "dim")
    check_float_dtype(dtype)
    head = ("v", (d,), head_scale)
    if n_classes is not None:
        head = ("W", (d, check_count(n_classes, "n_classes", minimum=2)), head_scale)
    out = {}
    for name, shape, scale in (("E", (V, d), init_scale), ("p", (d,), 1.0), head):
        draw = torch.randn(shape, generator=generator, dtype=dtype) * (scale / d**0.5)
        out[name] = draw.to(device)
    out["p"] = out["p"] * cls_scale
    return out


def predicted_pearson(
    prediction: object, init_scale: float, head_norm_sq: float, dim: int
) -> float:
    """The Pearson correlation of ``E^1 . v`` with ``prediction`` when the only noise is
    ``E^0_s . v ~ N(0, init_scale^2 ||v||^2 / d)``."""
    pred = np.asarray(prediction, dtype=np.float64).ravel()
    dim = check_count(dim, "dim")
    if (
        pred.size < 2
        or not np.isfinite(pred).all()
        or not 0 <= init_scale < math.inf
        or not 0 < head_norm_sq < math.inf
    ):
        raise ValueError(
            "need >= 2 finite predictions, finite init_scale >= 0 and head_norm_sq > 0"
        )
    signal = float(pred.std())
    noise = init_scale**2 * head_norm_sq / dim
    return signal / float(np.sqrt(signal**2 + noise))


def pearson(x: object, y: object) -> float:
    """Pearson correlation of two equal-length arrays (flattened)."""
    a = np.asarray(x, dtype=np.float64).ravel()
    b = np.asarray(y, dtype=np.float64).ravel()
    if a.shape != b.shape or a.size < 2:
        raise ValueError("pearson needs two arrays of the same length >= 2")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("pearson needs finite values")
    if a.std() == 0 or b.std() == 0:
        raise ValueError("pearson is undefined for a constant array")
    return float(np.corrcoef(a, b)[0, 1])
