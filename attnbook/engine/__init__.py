"""The count engine: sequences as token counts and the passes over memory that use them.

- :mod:`~attnbook.engine.counts`   -- :class:`TokenCounts`, the bag-of-tokens (CSR)
  representation;
- :mod:`~attnbook.engine.kernels`  -- the engine's passes (compiled C,
  ``count_kernels.c``, with torch twins);
- :mod:`~attnbook.engine.pass_checks` -- the checks the passes run on their arguments;
- :mod:`~attnbook.engine.fused`    -- the one-layer model's training step in one sweep
  over ``E`` (and the logistic count products in one pass);
- :mod:`~attnbook.engine.segments` -- per-sequence sums and maxima of stored entries;
- :mod:`~attnbook.engine.memory`   -- memory for the embeddings' gradient (huge pages,
  reuse);
- :mod:`~attnbook.engine.gpu`      -- the engine's GPU form (passes without host
  synchronisation, Triton kernels, the one-layer model on them, its CUDA graph); not
  imported here: only code that runs on CUDA imports it.

Layer: above :mod:`attnbook.validation`. It imports only NumPy and torch (and Triton
where it is installed) besides it.
"""
