"""Agent tools: remember / recall / revise over one ScrubJay memory."""

from __future__ import annotations

from typing import Any

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import Field, create_model
from scrubjay import MemoryNotFoundError, ScrubJayMemory

from ._search import filtered_search

__all__ = ["create_memory_tools"]

def create_memory_tools(memory: ScrubJayMemory, *, context: str = "", k: int = 5,
                        include_stale: bool = False) -> list[BaseTool]:
    """Three tools an agent can call, all backed by ``memory``.

    * ``remember(text, context="")`` stores a memory and reports how fast it goes stale;
    * ``recall(query, k=...)`` returns the best memories for the query's content, best first,
      each with its id and flagged stale or not (stale ones are left out unless
      ``include_stale=True``). The ranking is by content and freshness only: a memory that
      answers the question outranks one that merely shares the conversation;
    * ``revise(memory_id, new_information)`` replaces the memory with that id (an id from
      ``recall``) by the new information, keeping its context and metadata, dated now. Only
      that memory changes: no other memory is touched (unlike
      :meth:`ScrubJayMemory.integrate`, which updates every memory close enough to the news).

    ``context`` is the default "where" of the memories ``remember`` stores (e.g. the
    conversation).

    Example:
        .. code-block:: python

            tools = create_memory_tools(memory, context="chat with alice")
            agent = create_react_agent(ChatOllama(model="qwen3:30b"), tools)
    """

    default_context, default_k = context, k

    def remember(text: str, context: str = "") -> str:
        rec = memory.add(text, context=context or default_context)
        return (f"Remembered {rec.id}: {rec.label}, perishability {rec.pi:.2f}, "
                f"useful for about {rec.tau_s / 3600:.1f} h.")

    def recall(query: str, k: int | None = None) -> str:
        # no query context: where a memory was said must not outrank what it says
        hits = filtered_search(memory, query, k or default_k, include_stale=include_stale)
        if not hits:
            return "No relevant memory."
        return "\n".join(f"- {h.text} (score {h.score:.2f}, "
                         f"{'stale' if h.stale else 'fresh'}, id {h.id})" for h in hits)

    def revise(memory_id: str, new_information: str) -> str:
        try:
            old = memory.get(memory_id)
        except MemoryNotFoundError:
            return f"No memory with id {memory_id!r}; call recall to find the memory's id."
        rec = memory.add_many([{"id": old.id, "text": new_information, "context": old.context,
                                "metadata": dict(old.metadata)}])[0]
        return (f"Revised {rec.id}: was {old.text!r}, now {rec.text!r} ({rec.label}, useful "
                f"for about {rec.tau_s / 3600:.1f} h).")

    where = "where it was said, e.g. the conversation (optional)"
    return [
        _tool(remember, "Store a fact, preference or situation for later.",
              text=(str, Field(description="what to remember")),
              context=(str, Field(default="", description=where))),
        _tool(recall, "Find what you remember about a question, best first, each with its id; "
              "stale memories are flagged or left out.",
              query=(str, Field(description="the question")),
              k=(int | None, Field(default=None, description="how many memories (optional)"))),
        _tool(revise, "Correct one memory that changed: give its id (from recall) and what is "
              "true now. Only that memory changes.",
              memory_id=(str, Field(description="the id of the memory to revise, from recall")),
              new_information=(str, Field(description="what is true now"))),
    ]


def _tool(func: Any, description: str, **fields: Any) -> BaseTool:
    schema = create_model(f"{func.__name__.title()}Args", **fields)
    return StructuredTool.from_function(func=func, name=func.__name__, description=description,
                                        args_schema=schema)
