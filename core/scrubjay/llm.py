"""Chat-model calls: the paper's prompts, a timeout, and strict JSON parsing.

Any LangChain chat model works (``llm.invoke(prompt)`` returning a message with ``.content``), as
does any callable ``str -> str``. This module imports no framework. Every failure (an exception,
a timeout, an empty, huge or malformed reply) becomes :class:`~scrubjay.errors.LLMError`, which
the callers catch to fall back to the offline estimates; the first failure is logged once at
WARNING, later ones at DEBUG.
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
from collections.abc import Mapping
from typing import Any

from .errors import LLMError

__all__ = [
    "ANNOTATE_PROMPT",
    "CLASSIFY_PROMPT",
    "RCI_PROMPT",
    "LLMClient",
    "finite_float",
    "parse_json_object",
]

logger = logging.getLogger(__name__)

#: Paper App. F.3, verbatim.
CLASSIFY_PROMPT = (
    'Classify memory perishability and utility horizon. Return strict JSON: {{"label": str, '
    '"pi": float, "tau_sec": float}}. Labels: factual, procedural, task_specific, ephemeral. '
    "Context: {context} Memory: {text}"
)
#: Paper App. F.4, verbatim.
RCI_PROMPT = (
    "Given new information, infer latent memory update deltas. Return strict JSON: "
    '{{"delta_value": float, "delta_pi": float, "delta_tau": float, "summary": str}}. '
    "delta_tau is relative ratio change where +0.2 means +20%. Context: {context} "
    "New information: {new_info_text}"
)
#: Paper App. F.5, verbatim.
ANNOTATE_PROMPT = (
    "Summarize in one sentence when this memory will be useful in future tasks. Return plain "
    "text only. Context: {context} Memory: {text}"
)

_FENCE_RE = re.compile(r"^\s*```(?:json|JSON)?\s*(.*?)\s*```\s*$", re.DOTALL)


def _content(reply: Any) -> str:
    """The text of a LangChain message, a string, or a list of content blocks."""
    content = getattr(reply, "content", reply)
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, Mapping) and isinstance(block.get("text"), str):
                parts.append(block["text"])
        return "".join(parts)
    raise LLMError(f"The chat model returned {type(content).__name__}, not text.")


class LLMClient:
    """Calls one chat model with a timeout and reports failures as :class:`LLMError`."""

    def __init__(self, llm: Any, *, timeout_s: float, max_reply_chars: int) -> None:
        if not (hasattr(llm, "invoke") or callable(llm)):
            from .errors import InvalidInputError

            raise InvalidInputError(
                "The 'llm' parameter of ScrubJayMemory must be a LangChain chat model (with "
                f".invoke) or a callable str -> str. Got {type(llm).__name__} instead.")
        self.llm = llm
        self.timeout_s = timeout_s
        self.max_reply_chars = max_reply_chars
        self.calls = 0
        self._warned = False
        self._lock = threading.Lock()

    def complete(self, prompt: str) -> str:
        """Return the model's reply text, or raise :class:`LLMError`."""
        with self._lock:
            self.calls += 1
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                reply = self.llm.invoke(prompt) if hasattr(self.llm, "invoke") else self.llm(prompt)
                box["text"] = _content(reply)
            except BaseException as exc:  # noqa: BLE001 - reported to the caller below
                box["error"] = exc

        worker = threading.Thread(target=run, name="scrubjay-llm", daemon=True)
        worker.start()
        worker.join(self.timeout_s)
        if worker.is_alive():
            raise self._fail(LLMError(f"The chat model did not answer within "
                                      f"{self.timeout_s:g} s (config.llm.timeout_s)."))
        if "error" in box:
            exc = box["error"]
            err = LLMError(f"The chat model raised {type(exc).__name__}: {exc}")
            err.__cause__ = exc
            raise self._fail(err)
        text = box.get("text", "")
        if not isinstance(text, str) or not text.strip():
            raise self._fail(LLMError("The chat model returned an empty reply."))
        if len(text) > self.max_reply_chars:
            raise self._fail(LLMError(f"The chat model's reply has {len(text)} characters, more "
                                      f"than config.llm.max_reply_chars={self.max_reply_chars}."))
        return text

    def _fail(self, err: LLMError) -> LLMError:
        if not self._warned:
            self._warned = True
            logger.warning("LLM unavailable, using the offline fallbacks (%s). Further failures "
                           "are logged at DEBUG.", err)
        else:
            logger.debug("LLM call failed, offline fallback used: %s", err)
        return err

    def note_parse_failure(self, err: LLMError) -> None:
        """Log a malformed reply the same way as a failed call."""
        self._fail(err)


def parse_json_object(text: str) -> dict[str, Any]:
    """Parse a reply that must be one JSON object (optionally inside a ``` fence).

    Raises :class:`LLMError` for anything else: prose around the object, arrays, NaN literals,
    duplicate keys or nesting deeper than the prompts ask for.
    """
    match = _FENCE_RE.match(text)
    body = (match.group(1) if match else text).strip()

    def no_constants(name: str) -> Any:
        raise ValueError(f"non-standard JSON constant {name}")

    def no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in pairs]
        if len(set(keys)) != len(keys):
            raise ValueError("duplicate keys")
        return dict(pairs)

    try:
        obj = json.loads(body, parse_constant=no_constants, object_pairs_hook=no_duplicates)
    except (ValueError, RecursionError) as exc:
        raise LLMError(f"The chat model's reply is not strict JSON ({exc}): {text[:200]!r}") \
            from exc
    if not isinstance(obj, dict):
        raise LLMError(f"The chat model's reply must be a JSON object. Got "
                       f"{type(obj).__name__} instead: {text[:200]!r}")
    return obj


def finite_float(obj: Mapping[str, Any], key: str) -> float:
    """``obj[key]`` as a finite float (numbers, or numeric strings), else :class:`LLMError`."""
    if key not in obj:
        raise LLMError(f"The chat model's JSON lacks the key {key!r}.")
    value = obj[key]
    if isinstance(value, bool):
        raise LLMError(f"The chat model's {key!r} must be a number. Got a bool instead.")
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError as exc:
            raise LLMError(f"The chat model's {key!r} must be a number. Got {value!r}.") from exc
    if not isinstance(value, (int, float)):
        raise LLMError(f"The chat model's {key!r} must be a number. Got "
                       f"{type(value).__name__} instead.")
    try:
        out = float(value)
    except OverflowError as exc:
        raise LLMError(f"The chat model's {key!r} is out of range.") from exc
    if not math.isfinite(out):
        raise LLMError(f"The chat model's {key!r} must be finite. Got {value!r}.")
    return out
