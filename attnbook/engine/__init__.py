"""The count engine: sequences as token counts (:mod:`~attnbook.engine.counts`) and the
passes over memory that use them: compiled with torch twins (``kernels``, checked by
``pass_checks``), the fused one-layer training step (``fused``), row reductions
(``segments``), gradient memory (``memory``) and the GPU form (``gpu``, imported only
where a computation runs on CUDA). Imports only NumPy, torch (Triton where installed)
and :mod:`attnbook.validation`."""
