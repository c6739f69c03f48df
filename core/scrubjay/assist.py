"""What the chat model does for the memory, each with its offline fallback.

* :func:`annotate`: the future-oriented annotations of a batch (paper §7, batched);
* :func:`event_deltas`: the RCI deltas of one event (paper §3.5, ONE call per event);
* :func:`budget`: the calls of one operation share ``config.llm.timeout_s``.

Without a chat model (``llm=None``), or when it fails, the offline answers are used.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from .annotation import annotate_many
from .config import ScrubJayConfig
from .errors import LLMError
from .llm import RCI_PROMPT, LLMClient
from .rci import fallback_deltas, parse_deltas
from .types import Deltas

__all__ = ["annotate", "budget", "event_deltas"]


def budget(llm: LLMClient | None) -> contextlib.AbstractContextManager[None]:
    """One operation's chat-model calls share ``config.llm.timeout_s``."""
    return llm.budget() if llm is not None else contextlib.nullcontext()


def annotate(llm: LLMClient | None, config: ScrubJayConfig, texts: Sequence[str],
                contexts: Sequence[str]) -> list[str]:
    """Each memory's annotation (empty without a model, or with ``annotate=False``)."""
    if llm is None or not config.llm.annotate:
        return [""] * len(texts)
    return annotate_many(llm, list(texts), list(contexts), batch_items=config.llm.batch_items)


def event_deltas(llm: LLMClient | None, config: ScrubJayConfig, new_info: str,
                 context: str) -> tuple[Deltas, bool, int, str | None]:
    """``(deltas, used the model, calls made, why the fallback was used)`` of one event."""
    if llm is None:
        return fallback_deltas(new_info, config.rci), False, 0, None
    try:
        reply = llm.complete(RCI_PROMPT.format(context=context, new_info_text=new_info))
        return parse_deltas(reply, config.rci), True, 1, None
    except LLMError as err:
        llm.note_parse_failure(err)
        return fallback_deltas(new_info, config.rci), False, 1, str(err)
