"""LlamaIndex integration for scrubjay (translation only; see issue #4)."""

__all__: list[str] = []
