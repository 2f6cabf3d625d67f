"""attnbook: one-layer softmax attention with trained embeddings, in code. Layers,
each importing only from those before: ``validation``, ``runtime``, ``engine``,
``data``, ``models``, ``theory``, ``experiments``, ``book`` (what a chapter calls)."""

__version__ = "0.2.0"
