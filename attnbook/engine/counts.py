"""A corpus as token counts: the model has no positions, so a sequence enters it only
through the counts ``n_s(X)`` of its tokens. :class:`TokenCounts` holds them in CSR
form; every engine and statistic of attnbook works on it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch

from attnbook.validation import (
    ArgumentTypeError,
    check_count,
    check_instance,
    check_sequences,
    check_vocabulary,
)

__all__ = [
    "TokenCounts",
    "as_token_counts",
    "check_counts",
    "pad_arrays",
    "token_counts_over",
]


def pad_arrays(
    arrays: list[np.ndarray], device: torch.device | str | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Checked sequences as a zero-padded ``(n, T)`` id matrix and its boolean mask (the
    dense references' layout)."""
    lengths = torch.tensor([a.size for a in arrays], device=device)
    T = int(lengths.max())
    ids = torch.zeros(len(arrays), T, dtype=torch.int64, device=device)
    for i, a in enumerate(arrays):
        ids[i, : a.size] = torch.from_numpy(a).to(device)
    mask = torch.arange(T, device=device)[None, :] < lengths[:, None]
    return ids, mask


@dataclass(frozen=True)
class TokenCounts:
    """A corpus of ``n`` sequences over ``vocab_size`` tokens in CSR form: row ``i``
    holds ``token_ids[indptr[i]:indptr[i + 1]]`` (distinct, sorted) with their
    ``counts`` (>= 1), all int64. Immutable; derived tensors are cached on it."""

    indptr: torch.Tensor
    token_ids: torch.Tensor
    counts: torch.Tensor
    vocab_size: int
    _cache: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_count(self.vocab_size, "TokenCounts.vocab_size")
        for name in ("indptr", "token_ids", "counts"):
            t = getattr(self, name)
            if not isinstance(t, torch.Tensor) or t.dtype != torch.int64 or t.ndim != 1:
                raise ValueError(f"TokenCounts.{name} must be a 1-D int64 tensor")
            if t.layout != torch.strided or t.device != self.indptr.device:
                raise ValueError(
                    f"TokenCounts.{name} must be a dense tensor on indptr's device"
                )
        if self.indptr.numel() < 2:
            raise ValueError("TokenCounts needs at least one sequence")
        if self.token_ids.shape != self.counts.shape:
            raise ValueError("token_ids and counts must have the same length")
        if int(self.indptr[0]) != 0 or int(self.indptr[-1]) != self.token_ids.numel():
            raise ValueError("indptr must start at 0 and end at nnz")
        if bool((self.indptr[1:] <= self.indptr[:-1]).any()):
            raise ValueError(
                "every sequence must hold at least one token (empty row in indptr)"
            )
        if self.token_ids.numel() and (
            int(self.token_ids.min()) < 0
            or int(self.token_ids.max()) >= self.vocab_size
        ):
            raise ValueError(f"token ids must lie in [0, {self.vocab_size})")
        if self.counts.numel() and int(self.counts.min()) < 1:
            raise ValueError("counts must be positive")

    # ----------------------------------------------------------------- constructors
    @classmethod
    def _trusted(
        cls,
        indptr: torch.Tensor,
        token_ids: torch.Tensor,
        counts: torch.Tensor,
        vocab_size: int,
    ) -> "TokenCounts":
        """From parts that hold the invariants by construction (not checked again)."""
        obj = object.__new__(cls)
        parts = dict(indptr=indptr, token_ids=token_ids, counts=counts)
        for name, value in {**parts, "vocab_size": vocab_size, "_cache": {}}.items():
            object.__setattr__(obj, name, value)
        return obj

    @classmethod
    def from_sequences(cls, sequences: object, vocab_size: int) -> "TokenCounts":
        """Count the tokens of each sequence (checked)."""
        vocab_size = check_count(vocab_size, "vocab_size")
        return cls._from_arrays(check_sequences(sequences, vocab_size), vocab_size)

    @classmethod
    def _from_arrays(cls, arrays: list[np.ndarray], vocab_size: int) -> "TokenCounts":
        lengths = np.fromiter((a.size for a in arrays), np.int64, count=len(arrays))
        flat = np.concatenate(arrays)
        rows = np.repeat(np.arange(len(arrays), dtype=np.int64), lengths)
        return cls._from_valid_pairs(rows, flat, len(arrays), int(vocab_size))

    @classmethod
    def from_pairs(
        cls, rows: np.ndarray, tokens: np.ndarray, n_sequences: int, vocab_size: int
    ) -> "TokenCounts":
        """From one (row, token) pair per occurrence, in any order; every row in ``[0,
        n_sequences)`` must hold a token."""
        n_sequences = check_count(n_sequences, "n_sequences")
        vocab_size = check_count(vocab_size, "vocab_size")
        rows, tokens = np.asarray(rows), np.asarray(tokens)
        for name, arr, top in (
            ("rows", rows, n_sequences),
            ("tokens", tokens, vocab_size),
        ):
            if arr.ndim != 1 or arr.dtype.kind not in "iu":
                raise ArgumentTypeError(f"{name} must be a 1-D integer array")
            if arr.size and (arr.min() < 0 or arr.max() >= top):
                raise ValueError(f"{name} must lie in [0, {top})")
        if rows.shape != tokens.shape:
            raise ValueError("rows and tokens must have the same length")
        rows, tokens = rows.astype(np.int64), tokens.astype(np.int64)
        if np.bincount(rows, minlength=n_sequences).min() == 0:
            raise ValueError(
                "every sequence must hold at least one token (empty row in indptr)"
            )
        return cls._from_valid_pairs(rows, tokens, n_sequences, vocab_size)

    @classmethod
    def _from_valid_pairs(
        cls, rows: np.ndarray, tokens: np.ndarray, n_sequences: int, vocab_size: int
    ) -> "TokenCounts":
        keys, counts = np.unique(rows * vocab_size + tokens, return_counts=True)
        key_rows = keys // vocab_size
        indptr = np.zeros(n_sequences + 1, dtype=np.int64)
        np.cumsum(np.bincount(key_rows, minlength=n_sequences), out=indptr[1:])
        return cls._trusted(
            torch.from_numpy(indptr),
            torch.from_numpy(keys % vocab_size),
            torch.from_numpy(counts.astype(np.int64)),
            vocab_size,
        )

    # ----------------------------------------------------------------- views
    @property
    def n_sequences(self) -> int:
        return self.indptr.numel() - 1

    @property
    def nnz(self) -> int:
        return self.token_ids.numel()

    def _cached(self, key: object, make) -> torch.Tensor:
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    @property
    def row_ids(self) -> torch.Tensor:
        """``(nnz,)`` the sequence of every stored entry."""
        return self._cached(
            "row_ids",
            lambda: torch.repeat_interleave(
                torch.arange(self.n_sequences, device=self.indptr.device),
                self.indptr.diff(),
            ),
        )

    @property
    def lengths(self) -> torch.Tensor:
        """``(n,)`` int64 lengths ``T_i`` (repeats included)."""

        def make() -> torch.Tensor:
            out = torch.zeros(
                self.n_sequences, dtype=torch.int64, device=self.counts.device
            )
            return out.index_add_(0, self.row_ids, self.counts)

        return self._cached("lengths", make)

    def float_lengths(self, dtype: torch.dtype) -> torch.Tensor:
        """``(n,)`` the lengths as ``dtype``."""
        return self._cached(("lengths", dtype), lambda: self.lengths.to(dtype))

    def float_counts(self, dtype: torch.dtype) -> torch.Tensor:
        """``(nnz,)`` the counts as ``dtype``."""
        return self._cached(("counts", dtype), lambda: self.counts.to(dtype))

    def sparse_matrices(self, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """The ``(n, V)`` count matrix and its transpose as CSR tensors of ``dtype``."""

        def make() -> tuple[torch.Tensor, torch.Tensor]:
            import warnings

            values = self.float_counts(dtype)
            n, V = self.n_sequences, self.vocab_size
            order = torch.argsort(
                self.token_ids, stable=True
            )  # rows stay sorted per token
            col_ptr = torch.zeros(V + 1, dtype=torch.int64, device=self.device)
            torch.cumsum(
                torch.bincount(self.token_ids, minlength=V), 0, out=col_ptr[1:]
            )
            # 32-bit indices when they fit: the sparse kernels (MKL, cuSPARSE) then use
            # them as they are instead of converting 64-bit ones on every product.
            small = max(self.nnz, n, V) < 2**31 - 1
            idx = (lambda t: t.to(torch.int32)) if small else (lambda t: t)
            with warnings.catch_warnings():  # "sparse CSR support is in beta state"
                warnings.simplefilter("ignore", UserWarning)
                A = torch.sparse_csr_tensor(
                    idx(self.indptr),
                    idx(self.token_ids),
                    values,
                    size=(n, V),
                    check_invariants=False,
                )
                At = torch.sparse_csr_tensor(
                    idx(col_ptr),
                    idx(self.row_ids[order]),
                    values[order],
                    size=(V, n),
                    check_invariants=False,
                )
            return A, At

        return self._cached(("csr", dtype), make)

    @property
    def device(self) -> torch.device:
        return self.token_ids.device

    def to(self, device: torch.device | str) -> "TokenCounts":
        """The same counts on ``device`` (``self`` when already there)."""
        try:
            target = torch.device(device)
        except (RuntimeError, TypeError) as err:
            raise ValueError(f"device {device!r} is not a torch device") from err
        if target.type == "cuda" and target.index is None:
            target = torch.device("cuda", torch.cuda.current_device())
        if target == self.device:
            return self
        return TokenCounts._trusted(
            self.indptr.to(device),
            self.token_ids.to(device),
            self.counts.to(device),
            self.vocab_size,
        )

    def select(self, index: np.ndarray | Sequence[int]) -> "TokenCounts":
        """The sub-corpus made of the rows in ``index`` (in that order)."""
        index = np.asarray(index)
        if index.dtype.kind not in "iu":
            raise ArgumentTypeError(
                f"index must hold integer row numbers, got dtype {index.dtype}"
            )
        index = index.astype(np.int64)
        if index.ndim != 1 or index.size == 0:
            raise ValueError("index must be a non-empty 1-D array of row numbers")
        if index.min() < 0 or index.max() >= self.n_sequences:
            raise ValueError(f"row numbers must lie in [0, {self.n_sequences})")
        indptr = self.indptr.cpu().numpy()
        starts, stops = indptr[index], indptr[index + 1]
        sizes = stops - starts
        gather = np.repeat(starts - np.cumsum(sizes) + sizes, sizes) + np.arange(
            sizes.sum()
        )
        gather_t = torch.from_numpy(gather).to(self.device)
        new_indptr = np.zeros(index.size + 1, dtype=np.int64)
        np.cumsum(sizes, out=new_indptr[1:])
        return TokenCounts._trusted(
            torch.from_numpy(new_indptr).to(self.device),
            self.token_ids[gather_t],
            self.counts[gather_t],
            self.vocab_size,
        )

    def to_sequences(self) -> list[np.ndarray]:
        """One sequence per row, each token repeated by its count (sorted)."""
        indptr = self.indptr.cpu().numpy()
        toks = self.token_ids.cpu().numpy()
        cnts = self.counts.cpu().numpy()
        return [
            np.repeat(toks[a:b], cnts[a:b]) for a, b in zip(indptr[:-1], indptr[1:])
        ]

    def to_dense(self, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """``(n, V)`` dense count matrix (small corpora)."""
        out = torch.zeros(
            self.n_sequences, self.vocab_size, dtype=dtype, device=self.device
        )
        out[self.row_ids, self.token_ids] = self.counts.to(dtype)
        return out


def check_counts(counts: object, vocab_size: int, name: str = "counts") -> TokenCounts:
    """``counts`` if it is a :class:`TokenCounts` over exactly ``vocab_size`` tokens."""
    counts = check_instance(counts, TokenCounts, name)
    check_vocabulary(counts.vocab_size, vocab_size, name)
    return counts


def token_counts_over(sequences: object, vocab_size: int) -> TokenCounts:
    """:func:`as_token_counts` for a checked ``vocab_size`` (the rows of ``E``)."""
    if isinstance(sequences, TokenCounts):
        return check_counts(sequences, vocab_size)
    return TokenCounts._from_arrays(check_sequences(sequences, vocab_size), vocab_size)


def as_token_counts(sequences: object, vocab_size: int) -> TokenCounts:
    """A :class:`TokenCounts` over ``vocab_size`` tokens passed through, or a list
    counted."""
    return token_counts_over(sequences, check_count(vocab_size, "vocab_size"))
