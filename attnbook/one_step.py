"""One gradient step on the embeddings from a small initialization, and its prediction.

Binary model (logistic loss). By the rank-two structure of the gradient, one full-batch step of
size ``eta`` on ``E`` moves every row along ``v`` and ``p`` only:

    E_s^1 = E_s^0 + eta * (c_v[s] v + c_p[s] p),
    c_v[s] = (1/n) sum_i y_i sigmoid(-y_i f_i) pi_is,
    c_p[s] = (1/n) sum_i y_i sigmoid(-y_i f_i) pi_is (b_s - f_i),

with ``pi_is`` the attention mass on token ``s`` in sequence ``i`` and ``b_s = E_s . v``, all at
initialization (:func:`one_step_coefficients`, exact). For a small initialization
``c_v = alpha / 2 + O(sigma / sqrt(d))`` and ``c_p = O(sigma / sqrt(d))``, which gives the
closed-form predictions :func:`predicted_value_alignment` and :func:`predicted_cls_alignment`.

K-class model (cross-entropy, head ``W = [v_1, ..., v_K]``): one step gives
``E_s^1 . v_k ~ E_s^0 . v_k + eta sum_j gamma_sj v_j . v_k`` with the per-class signed
frequency ``gamma_sk = (1/n) sum_i (n_s(X_i) / T_i) (1{y_i = k} - 1/K)``
(:func:`class_signed_frequency`, :func:`predicted_class_alignment`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import torch

from .counts import TokenCounts, as_token_counts
from .frequency import average_signed_frequency
from .losses import as_signed_labels, logistic_loss
from .model import _count_softmax_terms, check_parameters, count_attention_output
from .multiclass import as_class_labels, cross_entropy_loss, multiclass_output

__all__ = [
    "one_step_coefficients",
    "first_order_coefficients",
    "one_gradient_step",
    "one_gradient_step_multiclass",
    "predicted_value_alignment",
    "predicted_cls_alignment",
    "class_signed_frequency",
    "predicted_class_alignment",
    "init_one_step",
    "OneStepResult",
    "run_one_step",
    "run_one_step_multiclass",
    "sweep_one_step",
    "predicted_pearson",
    "pearson",
    "loglog_slope",
]


def _check_eta(eta: float) -> float:
    if not isinstance(eta, (int, float, np.floating)) or not np.isfinite(eta) or eta <= 0:
        raise ValueError(f"step size eta must be a positive finite number, got {eta!r}")
    return float(eta)


def _params(params: Mapping[str, torch.Tensor], head: str) -> tuple[torch.Tensor, ...]:
    if not isinstance(params, Mapping):
        raise ValueError("params must be a mapping with keys 'E', 'p' and " + repr(head))
    missing = {"E", "p", head} - set(params)
    if missing:
        raise ValueError(f"params lacks {sorted(missing)}")
    return params["E"].detach(), params["p"].detach(), params[head].detach()


def one_step_coefficients(
    E: torch.Tensor, p: torch.Tensor, v: torch.Tensor, counts: object, labels: object
) -> tuple[torch.Tensor, torch.Tensor]:
    """The exact coefficients ``(c_v, c_p)``, each ``(V,)``, of ``-grad_E L = c_v v^T + c_p p^T``.

    ``L`` is the logistic loss of the binary model on ``counts`` (a :class:`TokenCounts` or a
    list of sequences) with +-1 ``labels``; everything is evaluated at ``(E, p, v)``.
    """
    check_parameters(E, p, v)
    E, p, v = E.detach(), p.detach(), v.detach()
    counts = as_token_counts(counts, E.shape[0]).to(E.device)
    y = as_signed_labels(labels, counts.n_sequences, dtype=E.dtype).to(E.device)
    w, b_tok, den, rows = _count_softmax_terms(E, p, v, counts)
    pi = w / den[rows]  # attention mass of every stored entry
    f = torch.zeros_like(den).index_add(0, rows, pi * b_tok)
    g = y * torch.sigmoid(-y * f)  # minus the derivative of the loss in f
    n = counts.n_sequences
    V = E.shape[0]
    weight = g[rows] * pi / n
    c_v = torch.zeros(V, dtype=E.dtype, device=E.device).index_add(0, counts.token_ids, weight)
    c_p = torch.zeros(V, dtype=E.dtype, device=E.device).index_add(
        0, counts.token_ids, weight * (b_tok - f[rows])
    )
    return c_v, c_p


def first_order_coefficients(
    E: torch.Tensor, p: torch.Tensor, v: torch.Tensor, counts: object, labels: object
) -> tuple[torch.Tensor, torch.Tensor]:
    """First-order expansions of :func:`one_step_coefficients` in the initial scores.

    With ``w_is = n_s(X_i) / T_i``, ``f0_i = sum_t w_it b_t`` and ``abar_i = sum_t w_it a_t``:

        c_v ~ alpha_s / 2 - beta_s / 4 + xi_s / 2,
        beta_s = (1/n) sum_i w_is f0_i,   xi_s = (1/n) sum_i y_i w_is (a_s - abar_i),
        c_p ~ (1/2n) sum_i y_i w_is (b_s - f0_i).

    The remainders are of second order in the scores ``a = E p``, ``b = E v``.
    """
    check_parameters(E, p, v)
    E, p, v = E.detach(), p.detach(), v.detach()
    counts = as_token_counts(counts, E.shape[0]).to(E.device)
    y = as_signed_labels(labels, counts.n_sequences, dtype=E.dtype).to(E.device)
    a, b = (E @ torch.stack((p, v), dim=1)).unbind(1)
    rows, tok = counts.row_ids, counts.token_ids
    n, V = counts.n_sequences, E.shape[0]
    share = counts.counts.to(E.dtype) / counts.lengths.to(E.dtype)[rows]
    zeros_n = torch.zeros(n, dtype=E.dtype, device=E.device)
    f0 = zeros_n.index_add(0, rows, share * b[tok])
    abar = zeros_n.index_add(0, rows, share * a[tok])
    zeros_v = torch.zeros(V, dtype=E.dtype, device=E.device)
    alpha = zeros_v.index_add(0, tok, y[rows] * share) / n
    beta = zeros_v.index_add(0, tok, share * f0[rows]) / n
    xi = zeros_v.index_add(0, tok, y[rows] * share * (a[tok] - abar[rows])) / n
    c_p = zeros_v.index_add(0, tok, y[rows] * share * (b[tok] - f0[rows])) / (2 * n)
    return alpha / 2 - beta / 4 + xi / 2, c_p


def one_gradient_step(
    params: Mapping[str, torch.Tensor],
    counts: object,
    labels: object,
    eta: float,
    *,
    method: str = "closed_form",
) -> torch.Tensor:
    """``E - eta * grad_E L`` for the binary model: one full-batch gradient step on ``E`` only.

    ``params`` holds ``E`` ``(V, d)``, ``p`` and ``v`` ``(d,)`` (float32 or float64, any device);
    they are not modified. ``method`` is ``"closed_form"`` (the rank-two formula of
    :func:`one_step_coefficients`) or ``"autograd"``. Returns a new detached ``(V, d)`` tensor.
    """
    eta = _check_eta(eta)
    E, p, v = _params(params, "v")
    if method == "closed_form":
        c_v, c_p = one_step_coefficients(E, p, v, counts, labels)
        return E + eta * (c_v[:, None] * v[None, :] + c_p[:, None] * p[None, :])
    if method == "autograd":
        check_parameters(E, p, v)
        counts = as_token_counts(counts, E.shape[0]).to(E.device)
        y = as_signed_labels(labels, counts.n_sequences, dtype=E.dtype).to(E.device)
        E_var = E.clone().requires_grad_(True)
        loss = logistic_loss(count_attention_output(E_var, p, v, counts), y)
        (grad,) = torch.autograd.grad(loss, E_var)
        return (E - eta * grad).detach()
    raise ValueError(f"method must be 'closed_form' or 'autograd', got {method!r}")


def one_gradient_step_multiclass(
    params: Mapping[str, torch.Tensor], counts: object, labels: object, eta: float
) -> torch.Tensor:
    """``E - eta * grad_E L`` for the K-class model with head ``params["W"]`` ``(d, K)`` and the
    cross-entropy loss on class ids ``labels`` in ``{0, ..., K-1}``. Returns a new ``(V, d)``."""
    eta = _check_eta(eta)
    E, p, W = _params(params, "W")
    if W.ndim != 2:
        raise ValueError("W must be a (d, K) tensor")
    counts = as_token_counts(counts, E.shape[0]).to(E.device)
    y = as_class_labels(labels, W.shape[1], counts.n_sequences).to(E.device)
    E_var = E.clone().requires_grad_(True)
    loss = cross_entropy_loss(multiclass_output(E_var, p, W, counts), y)
    (grad,) = torch.autograd.grad(loss, E_var)
    return (E - eta * grad).detach()


def predicted_value_alignment(alpha: torch.Tensor, v: torch.Tensor, eta: float) -> torch.Tensor:
    """The leading-order prediction ``(eta / 2) alpha_s ||v||^2`` of ``E_s . v`` after one step."""
    eta = _check_eta(eta)
    alpha, v = _as_tensor(alpha, "alpha"), _as_tensor(v, "v")
    if alpha.ndim != 1 or v.ndim != 1:
        raise ValueError("alpha must be (V,) and v must be (d,)")
    return 0.5 * eta * alpha.to(v.dtype).to(v.device) * (v @ v)


def predicted_cls_alignment(
    alpha: torch.Tensor, v: torch.Tensor, p: torch.Tensor, eta: float
) -> torch.Tensor:
    """The leading-order change ``(eta / 2) alpha_s (v . p)`` of ``E_s . p`` in one step."""
    eta = _check_eta(eta)
    alpha, v, p = _as_tensor(alpha, "alpha"), _as_tensor(v, "v"), _as_tensor(p, "p")
    if alpha.ndim != 1 or v.ndim != 1 or p.shape != v.shape:
        raise ValueError("alpha must be (V,), v and p must be (d,) of one shape")
    return 0.5 * eta * alpha.to(v.dtype).to(v.device) * (v @ p)


def class_signed_frequency(counts: object, labels: object, n_classes: int, vocab_size: int) -> torch.Tensor:
    """``(V, K)`` float64: ``gamma_sk = (1/n) sum_i (n_s(X_i) / T_i) (1{y_i = k} - 1/K)``."""
    if not isinstance(n_classes, (int, np.integer)) or n_classes < 2:
        raise ValueError(f"n_classes must be an integer >= 2, got {n_classes!r}")
    counts = as_token_counts(counts, vocab_size).to("cpu")
    y = as_class_labels(labels, int(n_classes), counts.n_sequences)
    rows = counts.row_ids
    share = counts.counts.to(torch.float64) / counts.lengths.to(torch.float64)[rows]
    target = torch.full((counts.n_sequences, int(n_classes)), -1.0 / n_classes, dtype=torch.float64)
    target[torch.arange(counts.n_sequences), y] += 1.0
    gamma = torch.zeros(vocab_size, int(n_classes), dtype=torch.float64)
    gamma.index_add_(0, counts.token_ids, share[:, None] * target[rows])
    return gamma / counts.n_sequences


def predicted_class_alignment(
    gamma: torch.Tensor, W: torch.Tensor, eta: float, *, cross_terms: bool = True
) -> torch.Tensor:
    """Prediction of ``E_s . v_k`` after one step, ``(V, K)``.

    With ``cross_terms`` it is ``eta * gamma @ (W^T W)``; without, ``eta gamma_sk ||v_k||^2``.
    """
    eta = _check_eta(eta)
    gamma, W = _as_tensor(gamma, "gamma"), _as_tensor(W, "W")
    if gamma.ndim != 2 or W.ndim != 2 or gamma.shape[1] != W.shape[1]:
        raise ValueError("gamma must be (V, K) and W must be (d, K) with the same K")
    gamma = gamma.to(W.dtype).to(W.device)
    gram = W.T @ W
    if not cross_terms:
        gram = torch.diag(torch.diagonal(gram))
    return eta * gamma @ gram


def _as_tensor(x: object, name: str) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        t = x.detach()
    else:
        try:
            t = torch.as_tensor(np.asarray(x, dtype=np.float64))
        except (TypeError, ValueError) as err:
            raise ValueError(f"{name} must be numeric") from err
    if not t.dtype.is_floating_point:
        t = t.to(torch.float64)
    return t


# ---------------------------------------------------------------------- experiments
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
    """The initialization of the one-step lemma.

    ``E`` has i.i.d. ``N(0, init_scale^2 / d)`` entries, ``p`` i.i.d. ``N(0, cls_scale^2 / d)``
    (exactly zero when ``cls_scale == 0``), and the head i.i.d. ``N(0, head_scale^2 / d)``:
    ``v`` of shape ``(d,)`` when ``n_classes`` is None, otherwise ``W`` of shape ``(d, K)``.
    """
    if vocab_size < 1 or dim < 1:
        raise ValueError(f"vocab_size and dim must be positive, got {vocab_size}, {dim}")
    if not init_scale > 0 or not head_scale > 0 or not cls_scale >= 0:
        raise ValueError("init_scale and head_scale must be positive, cls_scale non-negative")
    if n_classes is not None and n_classes < 2:
        raise ValueError(f"n_classes must be at least 2, got {n_classes}")

    def gauss(shape: tuple[int, ...], scale: float) -> torch.Tensor:
        t = torch.randn(shape, generator=generator, dtype=dtype) * (scale / dim**0.5)
        return t.to(device)

    out = {"E": gauss((vocab_size, dim), init_scale)}
    out["p"] = gauss((dim,), 1.0) * cls_scale  # drawn even for cls_scale = 0: same E and v
    if n_classes is None:
        out["v"] = gauss((dim,), head_scale)
    else:
        out["W"] = gauss((dim, int(n_classes)), head_scale)
    return out


@dataclass(frozen=True)
class OneStepResult:
    """Scores before and after one step of a binary problem, and the lemma's predictions.

    All arrays are float64 NumPy ``(V,)``: ``value0 = E^0 . v``, ``value1 = E^1 . v``,
    ``cls0 = E^0 . p``, ``cls1 = E^1 . p``, ``alpha``, ``pred_value = (eta/2) alpha ||v||^2``,
    ``pred_cls = (eta/2) alpha (v . p)``; ``vp = v . p`` and ``vv = ||v||^2``.
    """

    value0: np.ndarray
    value1: np.ndarray
    cls0: np.ndarray
    cls1: np.ndarray
    alpha: np.ndarray
    pred_value: np.ndarray
    pred_cls: np.ndarray
    vp: float
    vv: float
    first_order_increment: np.ndarray | None = None

    @property
    def total_error(self) -> float:
        """RMS over tokens of ``E^1 . v - (eta/2) alpha ||v||^2``."""
        return float(np.sqrt(np.mean((self.value1 - self.pred_value) ** 2)))

    @property
    def increment_error(self) -> float:
        """RMS over tokens of ``(E^1 - E^0) . v - (eta/2) alpha ||v||^2``."""
        return float(np.sqrt(np.mean((self.value1 - self.value0 - self.pred_value) ** 2)))

    @property
    def second_order_error(self) -> float:
        """RMS over tokens of ``(E^1 - E^0) . v`` minus its first-order expansion
        ``eta (c_v1 ||v||^2 + c_p1 v . p)`` (:func:`first_order_coefficients`)."""
        if self.first_order_increment is None:
            raise ValueError("this result was computed without the first-order expansion")
        diff = self.value1 - self.value0 - self.first_order_increment
        return float(np.sqrt(np.mean(diff**2)))

    @property
    def relative_increment_error(self) -> float:
        """``increment_error`` divided by the RMS of the prediction."""
        return self.increment_error / float(np.sqrt(np.mean(self.pred_value**2)))


def _seeded_init(counts: TokenCounts, dim: int, seed: int, **options) -> dict[str, torch.Tensor]:
    """:func:`init_one_step` for the vocabulary of ``counts``, from a torch generator seeded
    with ``seed``."""
    gen = torch.Generator().manual_seed(int(seed))
    return init_one_step(counts.vocab_size, dim, generator=gen, **options)


def _np64(t: torch.Tensor) -> np.ndarray:
    return t.detach().to("cpu", torch.float64).numpy()


def run_one_step(
    counts: TokenCounts,
    labels: object,
    dim: int,
    *,
    init_scale: float,
    eta: float,
    cls_scale: float = 1.0,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
    alpha: torch.Tensor | None = None,
) -> OneStepResult:
    """Initialize as in :func:`init_one_step` (torch generator seeded with ``seed``), take one
    exact gradient step on ``E`` and return the scores with the predictions.

    ``alpha`` may be passed when already computed (it depends on the data only).
    """
    params = _seeded_init(counts, dim, seed, init_scale=init_scale, cls_scale=cls_scale,
                          dtype=dtype, device=device)
    if alpha is None:
        alpha = average_signed_frequency(counts, labels, counts.vocab_size)
    E1 = one_gradient_step(params, counts, labels, eta)
    E0, p, v = params["E"], params["p"], params["v"]
    c_v1, c_p1 = first_order_coefficients(E0, p, v, counts, labels)
    first = eta * (c_v1 * (v @ v) + c_p1 * (v @ p))

    return OneStepResult(
        value0=_np64(E0 @ v),
        value1=_np64(E1 @ v),
        cls0=_np64(E0 @ p),
        cls1=_np64(E1 @ p),
        alpha=_np64(alpha),
        pred_value=_np64(predicted_value_alignment(alpha, v, eta)),
        pred_cls=_np64(predicted_cls_alignment(alpha, v, p, eta)),
        vp=float(v @ p),
        vv=float(v @ v),
        first_order_increment=_np64(first),
    )


def run_one_step_multiclass(
    counts: TokenCounts,
    labels: object,
    n_classes: int,
    dim: int,
    *,
    init_scale: float,
    eta: float,
    cls_scale: float = 1.0,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
) -> dict[str, np.ndarray]:
    """One step of the K-class model from :func:`init_one_step` (``W`` of shape ``(d, K)``).

    Returns float64 ``(V, K)`` arrays: ``measured`` ``E^1 . v_k``, ``increment``
    ``(E^1 - E^0) . v_k``, ``diagonal`` ``eta gamma_sk ||v_k||^2`` and ``full``
    ``eta (gamma W^T W)_sk`` (:func:`predicted_class_alignment`), and ``gamma`` itself.
    """
    params = _seeded_init(counts, dim, seed, init_scale=init_scale, cls_scale=cls_scale,
                          n_classes=n_classes, dtype=dtype, device=device)
    gamma = class_signed_frequency(counts, labels, n_classes, counts.vocab_size)
    E1 = one_gradient_step_multiclass(params, counts, labels, eta)
    W = params["W"]

    return {
        "measured": _np64(E1 @ W),
        "increment": _np64((E1 - params["E"]) @ W),
        "diagonal": _np64(predicted_class_alignment(gamma, W, eta, cross_terms=False)),
        "full": _np64(predicted_class_alignment(gamma, W, eta, cross_terms=True)),
        "gamma": gamma.numpy(),
    }


def sweep_one_step(
    counts: TokenCounts,
    labels: object,
    *,
    dims: Sequence[int],
    init_scales: Sequence[float],
    etas: Sequence[float] = (1.0,),
    seeds: Sequence[int] = (0,),
    cls_scale: float = 1.0,
    dtype: torch.dtype = torch.float64,
    device: torch.device | str | None = None,
):
    """One row per (dim, init_scale, eta, seed) of :func:`run_one_step`, as a pandas DataFrame.

    Columns: ``dim, init_scale, eta, seed, total_error, increment_error,
    relative_increment_error, second_order_error, pearson`` (of ``E^1 . v`` with the prediction) and
    ``predicted_pearson`` (:func:`predicted_pearson`).
    """
    import pandas as pd

    alpha = average_signed_frequency(counts, labels, counts.vocab_size)
    rows = []
    for dim in dims:
        for scale in init_scales:
            for eta in etas:
                for seed in seeds:
                    r = run_one_step(
                        counts, labels, int(dim), init_scale=float(scale), eta=float(eta),
                        cls_scale=cls_scale, seed=int(seed), dtype=dtype, device=device,
                        alpha=alpha,
                    )
                    rows.append(
                        {
                            "dim": int(dim),
                            "init_scale": float(scale),
                            "eta": float(eta),
                            "seed": int(seed),
                            "total_error": r.total_error,
                            "increment_error": r.increment_error,
                            "relative_increment_error": r.relative_increment_error,
                            "second_order_error": r.second_order_error,
                            "pearson": pearson(r.value1, r.pred_value),
                            "predicted_pearson": predicted_pearson(
                                r.pred_value, float(scale), r.vv, int(dim)
                            ),
                        }
                    )
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------- statistics
def predicted_pearson(prediction: object, init_scale: float, head_norm_sq: float, dim: int) -> float:
    """Pearson correlation between ``E^1 . v`` and ``prediction`` expected from the lemma when the
    only noise is the initial score ``E^0_s . v ~ N(0, init_scale^2 ||v||^2 / d)``, independent
    across tokens: ``sd(pred) / sqrt(sd(pred)^2 + init_scale^2 ||v||^2 / d)``."""
    pred = np.asarray(prediction, dtype=np.float64).ravel()
    if pred.size < 2 or not init_scale >= 0 or not head_norm_sq > 0 or dim < 1:
        raise ValueError("need >= 2 predictions, init_scale >= 0, head_norm_sq > 0, dim >= 1")
    signal = float(pred.std())
    noise = init_scale**2 * head_norm_sq / dim
    return signal / float(np.sqrt(signal**2 + noise))


def pearson(x: object, y: object) -> float:
    """Pearson correlation of two equal-length 1-D arrays (flattened)."""
    a = np.asarray(x, dtype=np.float64).ravel()
    b = np.asarray(y, dtype=np.float64).ravel()
    if a.shape != b.shape or a.size < 2:
        raise ValueError("pearson needs two arrays of the same length >= 2")
    if a.std() == 0 or b.std() == 0:
        raise ValueError("pearson is undefined for a constant array")
    return float(np.corrcoef(a, b)[0, 1])


def loglog_slope(x: Sequence[float], y: Sequence[float]) -> float:
    """Least-squares slope of ``log y`` against ``log x`` (all values must be positive).

    Repeated ``x`` values (several seeds) are allowed and enter the fit individually.
    """
    a = np.asarray(x, dtype=np.float64).ravel()
    b = np.asarray(y, dtype=np.float64).ravel()
    if a.shape != b.shape or a.size < 2:
        raise ValueError("loglog_slope needs two arrays of the same length >= 2")
    if (a <= 0).any() or (b <= 0).any() or not np.isfinite(np.r_[a, b]).all():
        raise ValueError("loglog_slope needs positive finite values")
    if np.unique(a).size < 2:
        raise ValueError("loglog_slope needs at least two distinct x values")
    return float(np.polyfit(np.log(a), np.log(b), 1)[0])
