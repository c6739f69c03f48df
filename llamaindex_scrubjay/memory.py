"""``ScrubJayMemoryBlock``: a long-term memory block for LlamaIndex's ``Memory``.

``Memory`` keeps the recent chat in its FIFO queue; the messages it flushes out go to
:meth:`ScrubJayMemoryBlock._aput` and become memories (each classified by how fast it goes
stale). On every ``Memory.get`` the block returns the relevant memories that are still fresh,
one line each, within a token budget, and ``Memory`` puts them into the system (or user) message.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.memory.memory import BaseMemoryBlock
from llama_index.core.utils import get_tokenizer
from scrubjay import Hit, InvalidInputError, ScrubJayMemory

from .embeddings import as_scrubjay_embedder

__all__ = ["ScrubJayMemoryBlock"]

logger = logging.getLogger(__name__)


def _text_of(message: ChatMessage) -> str:
    return (message.content or "").strip()


def format_hit(hit: Hit) -> str:
    """One prompt line: the memory, its kind, when it was remembered and its utility now."""
    when = datetime.fromtimestamp(hit.record.created_at_s, tz=UTC)
    text = " ".join(hit.text.split())  # one memory, one line (atruncate drops whole lines)
    return (f"- {text} [{hit.record.label}; remembered {when:%Y-%m-%d %H:%M} UTC; "
            f"utility {float(hit.utility):.2f}]")


class ScrubJayMemoryBlock(BaseMemoryBlock[str]):
    """Long-term memory for a LlamaIndex ``Memory`` (and so for agents and chat engines).

    Key init args:
        memory: ScrubJayMemory
            Where messages are remembered (positional or keyword; or use :meth:`from_store`).
        similarity_top_k: int
            How many memories are searched for per ``get`` (default 5).
        token_budget: int
            Most tokens the block's text may take (default 512).
        context: str | None
            The memory context of stored messages and the query context; ``None`` uses the
            ``Memory``'s session id, so a session's memories rank higher within that session.

    Instantiate and use:
        .. code-block:: python

            from llama_index.core.memory import Memory
            from llamaindex_scrubjay import ScrubJayMemoryBlock

            block = ScrubJayMemoryBlock(memory=ScrubJayMemory("./memory", namespace="alice"))
            memory = Memory.from_defaults(session_id="s1", memory_blocks=[block],
                                          token_limit=4000)
            agent.run("...", memory=memory)

    Only memories that are not stale at the query time are returned: an ephemeral fact ("I am
    parked on level 3 right now") disappears from the prompt once its utility has decayed.
    """

    name: str = Field(default="ScrubJayMemory", description="The name of the memory block.")
    description: str | None = Field(
        default="Long-term memories still fresh, ranked by relevance and staleness.",
        description="A description of the memory block.")
    similarity_top_k: int = Field(default=5, ge=1, le=10_000,
                                  description="How many memories are searched for per get.")
    retrieval_context_window: int = Field(
        default=5, ge=1, description="How many recent messages form the search query.")
    token_budget: int = Field(default=512, ge=1,
                              description="Most tokens the block's text may take.")
    context: str | None = Field(
        default=None, description="Context of stored messages and of queries; None: the "
                                  "Memory's session id.")
    store_roles: list[str] = Field(default_factory=lambda: ["user", "assistant"],
                                   description="Roles of the flushed messages that are stored.")
    tokenizer_fn: Callable[[str], list[Any]] = Field(
        default_factory=get_tokenizer, exclude=True,
        description="Token counter for the budget (LlamaIndex's default tokenizer).")

    _memory: ScrubJayMemory = PrivateAttr()

    def __init__(self, memory: ScrubJayMemory, **data: Any) -> None:
        if not isinstance(memory, ScrubJayMemory):
            raise InvalidInputError("The 'memory' parameter of ScrubJayMemoryBlock must be a "
                                    f"ScrubJayMemory. Got {type(memory).__name__} instead.")
        super().__init__(**data)
        self._memory = memory

    @classmethod
    def class_name(cls) -> str:
        return "ScrubJayMemoryBlock"

    @classmethod
    def from_store(cls, path: str | Path | None = None, *, client: Any = None,
                   namespace: str = "default", embed_model: Any = None,
                   memory_kwargs: dict[str, Any] | None = None,
                   **block_kwargs: Any) -> ScrubJayMemoryBlock:
        """Open a memory at ``path`` or behind ``client`` (see
        :meth:`ScrubJayRetriever.from_store <llamaindex_scrubjay.ScrubJayRetriever.from_store>`)."""
        if isinstance(embed_model, BaseEmbedding):
            embed_model = as_scrubjay_embedder(embed_model)
        memory = ScrubJayMemory(path, client=client, namespace=namespace, embedder=embed_model,
                                **(memory_kwargs or {}))
        return cls(memory, **block_kwargs)

    @property
    def memory(self) -> ScrubJayMemory:
        """The wrapped memory."""
        return self._memory

    def _context(self, session_id: Any) -> str:
        if self.context is not None:
            return self.context
        return session_id if isinstance(session_id, str) else ""

    # ------------------------------------------------------------------ get
    async def _aget(self, messages: list[ChatMessage] | None = None,
                    **block_kwargs: Any) -> str:
        """Fresh memories relevant to the recent ``messages``, one line each, within budget."""
        recent = (messages or [])[-self.retrieval_context_window:]
        query = " ".join(t for t in (_text_of(m) for m in recent) if t)
        if not query:
            return ""
        context = self._context(block_kwargs.get("session_id"))
        hits = await asyncio.to_thread(self._memory.search, query, context,
                                       self.similarity_top_k)
        lines: list[str] = []
        for hit in hits:
            if hit.stale:
                continue
            candidate = "\n".join([*lines, format_hit(hit)])
            if len(self.tokenizer_fn(candidate)) > self.token_budget:
                break
            lines.append(format_hit(hit))
        return "\n".join(lines)

    async def atruncate(self, content: str, tokens_to_truncate: int) -> str | None:
        """Drop the lowest-ranked lines until ``tokens_to_truncate`` tokens are saved."""
        lines = content.splitlines()
        before = len(self.tokenizer_fn(content))
        while lines and before - len(self.tokenizer_fn("\n".join(lines))) < tokens_to_truncate:
            lines.pop()
        return "\n".join(lines) or None

    # ------------------------------------------------------------------ put
    async def _aput(self, messages: list[ChatMessage]) -> None:
        """Remember each flushed message with text in one of ``store_roles``.

        The message is dated now (a ``ChatMessage`` has no time); its role and session id go
        into the memory's metadata, the block's context (or the session id) into its context.
        """
        items: list[dict[str, Any]] = []
        for message in messages:
            role = str(getattr(message.role, "value", message.role))
            text = _text_of(message)
            if role not in self.store_roles or not text:
                continue
            session_id = message.additional_kwargs.get("session_id")
            metadata: dict[str, Any] = {"role": role}
            if isinstance(session_id, str):
                metadata["session_id"] = session_id
            items.append({"text": text, "context": self._context(session_id),
                          "metadata": metadata})
        if items:
            await asyncio.to_thread(self._memory.add_many, items)
