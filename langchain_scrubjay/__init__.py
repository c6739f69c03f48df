"""LangChain / LangGraph integration for scrubjay (translation only; see issue #3)."""

__all__: list[str] = []
