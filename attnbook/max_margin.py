"""The max-margin token-selection problem and its solution."""

__all__: list[str] = []
