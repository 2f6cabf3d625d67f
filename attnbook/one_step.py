"""One gradient step on the embeddings from a small initialization, and its prediction."""

__all__: list[str] = []
