"""The count engine's GPU form: every pass without a host synchronisation
(:mod:`~attnbook.engine.gpu.passes`, their Triton kernels in
:mod:`~attnbook.engine.gpu.triton_passes`, the one-layer model on them in
:mod:`~attnbook.engine.gpu.attention`). Only the CUDA path imports it.
"""
