"""The one-layer attention model with an MLP head after the softmax.

    z(X) = sum_s pi_s(X) E_s,          pi_s(X) = n_s(X) exp(p . E_s) / sum_t n_t(X) exp(p . E_t),
    f(X) = v . relu(A z(X) + c),       A in R^{d x d}, c in R^d  (hidden width d).

The attention part is exactly the one-layer model's; only the linear head ``z -> z . v`` is
replaced by a one-hidden-layer ReLU network whose last layer is ``v``. ``f`` is still a function
of the bag of tokens: :func:`pooled_embedding` computes ``z`` for a whole corpus as one sparse
``(n, V) x (V, d)`` product with the attention weights as the sparse entries.
:func:`token_value_scores` gives ``g_s = v . relu(A E_s + c)``, the output on a sequence made of
token ``s`` alone, which is what ``E_s . v`` is in the linear model.
"""

from __future__ import annotations

import math

import torch

from .counts import TokenCounts, as_token_counts, validate_sequences
from .model import _segment_max

__all__ = [
    "init_mlp_head",
    "check_mlp_parameters",
    "pooled_embedding",
    "mlp_attention_output",
    "dense_mlp_attention_output",
    "token_value_scores",
]

_NAMES = ("E", "p", "v", "A", "c")


def check_mlp_parameters(params: dict[str, torch.Tensor]) -> None:
    """Raise ``ValueError`` unless ``params`` holds ``E`` (V, d), ``p``, ``v``, ``c`` (d,) and
    ``A`` (d, d), float32 or float64 of one dtype, on one device."""
    missing = [k for k in _NAMES if k not in params]
    if missing:
        raise ValueError(f"MLP-head parameters lack {missing}; expected {list(_NAMES)}")
    E = params["E"]
    if not isinstance(E, torch.Tensor) or E.ndim != 2 or min(E.shape) == 0:
        raise ValueError("E must be a (V, d) tensor with V, d > 0")
    if E.dtype not in (torch.float32, torch.float64):
        raise ValueError(f"E has dtype {E.dtype}; use torch.float32 or torch.float64")
    d = E.shape[1]
    for name, shape in {"p": (d,), "v": (d,), "c": (d,), "A": (d, d)}.items():
        t = params[name]
        if not isinstance(t, torch.Tensor) or tuple(t.shape) != shape:
            got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
            raise ValueError(f"{name} must have shape {shape} to match E, got {got}")
        if t.dtype != E.dtype or t.device != E.device:
            raise ValueError(f"{name} must share E's dtype ({E.dtype}) and device ({E.device})")


def init_mlp_head(
    vocab_size: int,
    dim: int,
    *,
    scale: float = 1.0,
    generator: torch.Generator | None = None,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> dict[str, torch.Tensor]:
    """``E``, ``p``, ``v`` with i.i.d. ``N(0, scale^2/d)`` entries (as
    :func:`attnbook.train.init_parameters`), ``A`` with i.i.d. ``N(0, 2/d)`` entries (He
    initialization, so ``relu(A x)`` keeps about the norm of ``x``) and ``c = 0``."""
    if vocab_size < 1 or dim < 1:
        raise ValueError(f"vocab_size and dim must be positive, got {vocab_size}, {dim}")
    if not scale > 0:
        raise ValueError(f"scale must be positive, got {scale}")
    std = scale / math.sqrt(dim)
    out = {
        "E": torch.randn((vocab_size, dim), generator=generator, dtype=dtype) * std,
        "p": torch.randn((dim,), generator=generator, dtype=dtype) * std,
        "v": torch.randn((dim,), generator=generator, dtype=dtype) * std,
        "A": torch.randn((dim, dim), generator=generator, dtype=dtype) * math.sqrt(2.0 / dim),
        "c": torch.zeros((dim,), dtype=dtype),
    }
    return {k: t.to(device).requires_grad_(True) for k, t in out.items()}


def pooled_embedding(E: torch.Tensor, p: torch.Tensor, counts: TokenCounts) -> torch.Tensor:
    """``(n, d)`` attention outputs ``z(X_i) = sum_s pi_s(X_i) E_s`` (differentiable in E, p)."""
    counts = counts.to(E.device)
    a_tok = (E @ p)[counts.token_ids]
    rows = counts.row_ids
    n = counts.n_sequences
    shift = _segment_max(a_tok, rows, n)
    w = counts.counts.to(E.dtype) * torch.exp(a_tok - shift[rows])
    den = torch.zeros(n, dtype=E.dtype, device=E.device).index_add(0, rows, w)
    weights = torch.sparse_coo_tensor(
        torch.stack((rows, counts.token_ids)),
        w / den[rows],
        (n, E.shape[0]),
        is_coalesced=True,  # rows sorted, tokens sorted within each row
        check_invariants=False,
    )
    return torch.sparse.mm(weights, E)


def _head(params: dict[str, torch.Tensor], z: torch.Tensor) -> torch.Tensor:
    return torch.relu(z @ params["A"].T + params["c"]) @ params["v"]


def mlp_attention_output(params: dict[str, torch.Tensor], sequences: object) -> torch.Tensor:
    """``f(X_i)`` for every sequence (a :class:`TokenCounts` or a list of token-id sequences)."""
    check_mlp_parameters(params)
    counts = as_token_counts(sequences, params["E"].shape[0])
    return _head(params, pooled_embedding(params["E"], params["p"], counts))


def dense_mlp_attention_output(params: dict[str, torch.Tensor], sequences: object) -> torch.Tensor:
    """``f(X_i)`` by padding, one embedding per position and a masked softmax (the reference)."""
    check_mlp_parameters(params)
    E = params["E"]
    arrays = validate_sequences(sequences, E.shape[0])
    lengths = torch.tensor([a.size for a in arrays], device=E.device)
    T = int(lengths.max())
    ids = torch.zeros(len(arrays), T, dtype=torch.int64, device=E.device)
    for i, a in enumerate(arrays):
        ids[i, : a.size] = torch.from_numpy(a).to(E.device)
    mask = torch.arange(T, device=E.device)[None, :] < lengths[:, None]
    x = E[ids]
    attn = torch.softmax((x @ params["p"]).masked_fill(~mask, -torch.inf), dim=1)
    z = (attn[..., None] * x).sum(dim=1)
    return _head(params, z)


def token_value_scores(params: dict[str, torch.Tensor]) -> torch.Tensor:
    """``(V,)`` ``g_s = v . relu(A E_s + c)``: the output on a sequence of token ``s`` alone."""
    check_mlp_parameters(params)
    return _head(params, params["E"])
