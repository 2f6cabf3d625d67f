"""attnbook: one-layer softmax attention with trained embeddings, in code.

Layers, each importing only from those before it: ``validation`` and ``runtime``
(argument checks; seeding and device), ``engine`` (token counts and the passes over
them), ``data``, ``models``, ``theory``, ``experiments``, ``book`` (what a chapter
calls). The benchmark lives outside the package, in ``benchmarks/``.
"""

__version__ = "0.2.0"
