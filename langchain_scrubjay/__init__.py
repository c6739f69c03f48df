"""LangChain / LangGraph integration for scrubjay: translation only (issue #3).

* :class:`ScrubJayRetriever` - a ``BaseRetriever`` (``scrubjay-mem[langchain]``);
* :class:`ScrubJayVectorStore` - a ``VectorStore`` (``scrubjay-mem[langchain]``);
* :class:`ScrubJayStore` - a LangGraph ``BaseStore`` (``scrubjay-mem[langgraph]``);
* :class:`ScrubJayKVStore` - a LangChain key-value ``BaseStore`` (``scrubjay-mem[langchain]``);
* :class:`ScrubJayChatMemory` - a classic-chain ``BaseMemory`` (``scrubjay-mem[classic]``);
* :func:`create_memory_tools` - remember / recall / revise tools for an agent.

Each is imported on first use, so ``import langchain_scrubjay`` loads no optional framework.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .memory import ScrubJayChatMemory
    from .retrievers import ScrubJayRetriever
    from .storage import ScrubJayKVStore
    from .stores import ScrubJaySearchItem, ScrubJayStore
    from .tools import create_memory_tools
    from .vectorstores import ScrubJayVectorStore

__all__ = [
    "ScrubJayChatMemory",
    "ScrubJayKVStore",
    "ScrubJayRetriever",
    "ScrubJaySearchItem",
    "ScrubJayStore",
    "ScrubJayVectorStore",
    "create_memory_tools",
]

_WHERE = {
    "ScrubJayRetriever": ".retrievers",
    "ScrubJayStore": ".stores",
    "ScrubJaySearchItem": ".stores",
    "ScrubJayVectorStore": ".vectorstores",
    "ScrubJayChatMemory": ".memory",
    "ScrubJayKVStore": ".storage",
    "create_memory_tools": ".tools",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        value = getattr(importlib.import_module(_WHERE[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
