"""A full-batch gradient of the one-layer model replayed from a CUDA graph, for the
GPU benchmark: the forward and backward pass of
:func:`attnbook.engine.gpu.attention.gpu_count_attention_output` and the logistic loss,
captured once and replayed with one launch (the same kernels on the same memory).
"""

from __future__ import annotations

from typing import Mapping

import torch

from attnbook.engine.counts import TokenCounts
from attnbook.engine.gpu.attention import gpu_count_attention_output
from attnbook.engine.gpu.passes import count_layout
from attnbook.validation import as_signed_labels

__all__ = ["GraphedGradient"]


class GraphedGradient:
    """The full-batch logistic loss of the one-layer model and its gradient, as a CUDA
    graph.

    ``params`` holds ``E``, ``p``, ``v`` (leaves on one CUDA device); ``counts`` and
    ``labels`` (+-1, checked) are copied there once. Calling the object replays the
    graph and returns the loss tensor (the same tensor every time, overwritten by each
    replay); ``E.grad``, ``p.grad``, ``v.grad`` then hold the gradient. Do not set them
    to ``None`` (``zero_grad(set_to_none=True)``) between replays: the graph writes
    into that memory. ``optimizer``, when given, is stepped by :meth:`step` after each
    replay (build it with ``capturable``/``fused`` Adam or SGD on the same tensors).

    ``warmup`` eager evaluations run first on a side stream (they compile the Triton
    kernels and let the allocator settle, as CUDA graph capture requires); they do not
    change the parameters. Raises ``ValueError`` for tensors not on a CUDA device and
    for labels other than -1 and +1.
    """

    def __init__(
        self,
        params: Mapping[str, torch.Tensor],
        counts: TokenCounts,
        labels: torch.Tensor,
        *,
        optimizer: torch.optim.Optimizer | None = None,
        warmup: int = 2,
    ) -> None:
        missing = [k for k in ("E", "p", "v") if k not in params]
        if missing:
            raise ValueError(f"params lacks {missing}; expected E, p and v")
        E, p, v = params["E"], params["p"], params["v"]
        if E.device.type != "cuda":
            raise ValueError(
                f"GraphedGradient needs parameters on a CUDA device, got {E.device}"
            )
        if warmup < 1:
            raise ValueError(f"warmup must be at least 1, got {warmup}")
        self.params = (E, p, v)
        self.optimizer = optimizer
        counts = counts.to(E.device)
        y = as_signed_labels(labels, counts.n_sequences, dtype=E.dtype).to(E.device)
        count_layout(counts, E.dtype)  # built now: not inside the capture
        self._counts, self._labels = counts, y

        side = torch.cuda.Stream(E.device)
        side.wait_stream(torch.cuda.current_stream(E.device))
        with torch.cuda.stream(side):
            for _ in range(warmup):
                self._clear_grads()
                self._loss_and_backward()
        torch.cuda.current_stream(E.device).wait_stream(side)
        self._clear_grads()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.loss = self._loss_and_backward()

    def _clear_grads(self) -> None:
        for t in self.params:
            t.grad = None

    def _loss_and_backward(self) -> torch.Tensor:
        E, p, v = self.params
        f = gpu_count_attention_output(E, p, v, self._counts)
        loss = torch.nn.functional.softplus(-self._labels * f).mean()
        loss.backward()
        return loss.detach()

    def __call__(self) -> torch.Tensor:
        """Replay the graph: the loss (a 0-d tensor on the device) and, in the
        parameters' ``.grad``, its gradient."""
        self.graph.replay()
        return self.loss

    def step(self) -> torch.Tensor:
        """One training step: replay the graph, then step the optimizer; returns the
        loss before the step."""
        if self.optimizer is None:
            raise ValueError("step() needs the optimizer given to GraphedGradient")
        loss = self()
        self.optimizer.step()
        return loss
