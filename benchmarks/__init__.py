"""Benchmark of the count engine against the usual padded implementation.

Run ``python -m benchmarks`` (full IMDB train split, ``d = 2048``; ``--help`` for
options). In one run it

1. prepares the training split with the vocabulary and encoding rules of
  :mod:`attnbook.data`
   (those :func:`attnbook.data.corpus.prepare_reviews` applies for the real-data
   chapter; done here step by step so that building the vocabulary and encoding are
   timed separately);
2. computes the full-batch loss and its gradient with respect to ``E``, ``p`` and ``v``
  by the
   *usual implementation* (:func:`usual_loss_and_grads`: padded sequences, one embedding
   lookup per position, masked softmax over positions, length-bucketed mini-batches
   whose gradients are summed) and by the count engine (:func:`engine_loss_and_grads`),
   checks that they agree, and times both;
3. times a full training step of the engine (forward, backward and an Adam step);
4. measures the memory bandwidth of the machine (a large array copy,
  :func:`copy_bandwidth`)
   and compares the engine with the time it takes to move the bytes a gradient
   evaluation must move at the very least (:func:`minimum_bytes`: the counts once, ``E``
   once, its gradient once); times each pass of the engine on its own
   (:func:`engine_passes`) and the gradient with the compiled kernels of
   :mod:`attnbook.engine.kernels` and with their torch twins (:func:`backend_times`);
5. times the two-layer model (:mod:`attnbook.models.two_layer`) against its padded
   reference on
  a
   subset;
6. shows how the engine's time grows with the number of documents, ``d`` and the
  vocabulary
   size (:func:`scaling_table`).

The last line printed is ``speedup=<ratio> bound_fraction=<fraction>``. Every time is
the minimum over several repetitions: other programs on the machine only ever add time.

Modules: :mod:`~benchmarks.usual` (the data and the padded implementation),
:mod:`~benchmarks.timing` (timers and the bandwidth bound),
:mod:`~benchmarks.measure`
(the measurements), :mod:`~benchmarks.gpu` (the engine's GPU form,
:mod:`attnbook.engine.gpu`, eager and in a CUDA graph; imported only for ``--device
cuda``), :mod:`~benchmarks.gpu_report` (the GPU
measurements of ``scripts/gpu_check.py`` as the Performance page's tables),
:mod:`~benchmarks.cli` (the command line). The benchmark is the top layer: it may
import every other subpackage; nothing imports it.
"""
