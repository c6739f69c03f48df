"""Agent tools: remember / recall / revise over one ScrubJay memory."""

from __future__ import annotations

from typing import Any

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import Field, create_model
from scrubjay import ScrubJayError, ScrubJayMemory

from ._search import filtered_search

__all__ = ["create_memory_tools"]

#: At most this many revisions that raised keep their time for a retry (the oldest goes first).
_RETRIES_KEPT = 64


def create_memory_tools(memory: ScrubJayMemory, *, context: str = "", k: int = 5,
                        include_stale: bool = False) -> list[BaseTool]:
    """Three tools an agent can call, all backed by ``memory``.

    * ``remember(text, context="")`` stores a memory and reports how fast it goes stale;
    * ``recall(query, k=...)`` returns the best memories, best first, each flagged stale or not
      (stale ones are left out unless ``include_stale=True``);
    * ``revise(new_information, context="")`` runs Retroactive Contextual Integration (RCI): the
      related memories are updated and the new information is stored. A call that raised
      (say, the store failed part-way) and is made again with the same words is the same RCI
      event, at the first call's time: the memories it updated before the failure are not
      updated twice (:meth:`ScrubJayMemory.integrate`).

    ``context`` is the default "where" of every call (e.g. the conversation).

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
        hits = filtered_search(memory, query, k or default_k, context=default_context,
                               keep=None if include_stale else (lambda h: not h.stale))
        if not hits:
            return "No relevant memory."
        return "\n".join(f"- {h.text} (score {h.score:.2f}, "
                         f"{'stale' if h.stale else 'fresh'}, id {h.id})" for h in hits)

    # (text, context) -> time of a revise that raised: an agent retries with the same words
    failed: dict[tuple[str, str], float] = {}

    def revise(new_information: str, context: str = "") -> str:
        ctx = context or default_context
        at = failed.pop((new_information, ctx), None)
        if at is None:
            at = memory.now()
        try:
            report = memory.integrate(new_information, context=ctx, at=at)
        except ScrubJayError:
            if len(failed) >= _RETRIES_KEPT:
                del failed[next(iter(failed))]
            failed[(new_information, ctx)] = at
            raise
        d = report.deltas
        return (f"Revised {len(report.affected)} memories (value {d.delta_value:+.2f}, "
                f"perishability {d.delta_pi:+.2f}, horizon {d.delta_tau:+.0%}); "
                f"stored the new information as {report.stored.id if report.stored else '-'}.")

    where = "where it was said, e.g. the conversation (optional)"
    return [
        _tool(remember, "Store a fact, preference or situation for later.",
              text=(str, Field(description="what to remember")),
              context=(str, Field(default="", description=where))),
        _tool(recall, "Find what you remember about a question, best first; stale memories "
              "are flagged or left out.",
              query=(str, Field(description="the question")),
              k=(int | None, Field(default=None, description="how many memories (optional)"))),
        _tool(revise, "Tell the memory that something changed; related memories are revised "
              "(RCI) and the new information is stored.",
              new_information=(str, Field(description="what changed")),
              context=(str, Field(default="", description=where))),
    ]


def _tool(func: Any, description: str, **fields: Any) -> BaseTool:
    schema = create_model(f"{func.__name__.title()}Args", **fields)
    return StructuredTool.from_function(func=func, name=func.__name__, description=description,
                                        args_schema=schema)
