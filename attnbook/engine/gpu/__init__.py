"""The count engine's GPU form: every pass without a host synchronisation.

- :mod:`~attnbook.engine.gpu.passes`        -- the count passes on the stored entries,
  each softmax shifted by its row's maximum, and the dense passes over ``E``;
- :mod:`~attnbook.engine.gpu.triton_passes` -- those passes as fused Triton kernels
  (float32, one head; Triton's interpreter runs them on a CPU);
- :mod:`~attnbook.engine.gpu.attention`     -- the one-layer model's outputs and
  gradients on these passes;
- :mod:`~attnbook.engine.gpu.graphed`       -- its full-batch loss and gradient replayed
  from a CUDA graph.

Nothing on the CPU path imports this package (``import attnbook.engine`` does not): the
benchmark imports it for ``--device cuda`` (:mod:`benchmarks.gpu`), and the tests
run its torch form and its Triton kernels on the CPU. Layer: the engine's; it imports
only torch, Triton where it is installed, and :mod:`attnbook.engine`.
"""
