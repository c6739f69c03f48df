"""Chat-model calls: the paper's prompts, one time budget per operation, strict JSON parsing.

Any LangChain chat model works (``llm.invoke(prompt)`` returning a message with ``.content``), as
does any callable ``str -> str``. This module imports no framework. Every failure (an exception,
a timeout, an empty, huge, malformed or non-text reply) becomes :class:`~scrubjay.errors.LLMError`,
which the callers catch to fall back to the offline estimates.

A hung model cannot hold the memory:

* **one budget per operation**: the calls of one ``add``, ``add_many`` or ``integrate`` share
  ``config.llm.timeout_s`` (:meth:`LLMClient.budget`), whatever their number;
* **one worker thread** per client runs the calls, one at a time: while a call that timed out
  is still running, no other is submitted (it fails at once), so a model that never answers
  holds one thread, not one per call;
* **a circuit breaker**: after a timeout the model is *offline* (every call fails at once) until
  ``config.llm.probe_interval_s`` has passed; the next call is then a probe, and the model is
  back online once a probe answers.

Log records never contain a prompt, a reply or a memory: errors name what was wrong (a key, a
type, a position), never the text.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import queue
import re
import threading
import time
import unicodedata
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from .errors import LLMError

__all__ = [
    "ANNOTATE_MANY_PROMPT",
    "ANNOTATE_PROMPT",
    "CLASSIFY_MANY_PROMPT",
    "CLASSIFY_PROMPT",
    "DEFAULT_PROBE_INTERVAL_S",
    "RCI_PROMPT",
    "LLMClient",
    "check_reply_text",
    "finite_float",
    "memories_block",
    "parse_json_object",
    "strip_controls",
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
#: App. F.3 for several memories in one call (ours: the paper classifies one per call). The
#: memories travel as a JSON array (:func:`memories_block`), so a memory's own line breaks or
#: numbering cannot shift the answers.
CLASSIFY_MANY_PROMPT = (
    "Classify the perishability and utility horizon of each memory below. Return strict JSON: "
    '{{"memories": [{{"label": str, "pi": float, "tau_sec": float}}, ...]}} with one object '
    "per memory, in the order given. Labels: factual, procedural, task_specific, ephemeral. "
    "Memories (a JSON array of context and memory): {memories}"
)
#: App. F.5 for several memories in one call (ours, as :data:`CLASSIFY_MANY_PROMPT`).
ANNOTATE_MANY_PROMPT = (
    "For each memory below, summarize in one sentence when it will be useful in future tasks. "
    'Return strict JSON: {{"annotations": [str, ...]}} with one plain-text sentence per memory, '
    "in the order given. Memories (a JSON array of context and memory): {memories}"
)

#: Seconds a chat model stays offline after a call timed out, before a call probes it again
#: (``config.llm.probe_interval_s``; chosen: long enough that a hung model costs one timeout a
#: minute, not one per operation; short enough that a restarted model is back within a minute).
DEFAULT_PROBE_INTERVAL_S = 60.0
#: An idle worker thread exits after this many seconds (a later call starts another; chosen).
WORKER_IDLE_S = 5.0

_FENCE_RE = re.compile(r"^\s*```(?:json|JSON)?\s*(.*?)\s*```\s*$", re.DOTALL)


def memories_block(texts: Sequence[str], contexts: Sequence[str]) -> str:
    """The memories of a batched prompt, as one JSON array.

    >>> memories_block(["a"], ["b"])
    '[{"context": "b", "memory": "a"}]'
    """
    return json.dumps([{"context": c, "memory": t} for t, c in zip(texts, contexts, strict=True)],
                      ensure_ascii=False)


def check_reply_text(value: str, what: str) -> str:
    """``value`` if it is text that may be stored, else :class:`LLMError`.

    The checks of user text (``scrubjay._validation.check_text``) for text a chat model wrote:
    no lone surrogate (Chroma writes UTF-8, ``json.loads('"\\ud800"')`` yields one), no NUL. The
    error names the position, never the text.
    """
    if "\x00" in value:
        raise LLMError(f"The chat model's {what} contains a NUL character at position "
                       f"{value.index(chr(0))}.")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise LLMError(f"The chat model's {what} is not valid Unicode text (a lone surrogate at "
                       f"position {exc.start}).") from None
    return value


def strip_controls(value: str) -> str:
    """``value`` with control and format characters (Unicode Cc, Cf: line breaks, escape
    sequences, bidi overrides, zero-width characters) replaced by spaces and runs of white space
    collapsed to one.

    >>> strip_controls("a\\x1b[31m b\\u202e\\nc")
    'a [31m b c'
    """
    cleaned = "".join(" " if unicodedata.category(ch) in ("Cc", "Cf") else ch for ch in value)
    return " ".join(cleaned.split())


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


class _Call:
    """One prompt handed to the worker, and what came back."""

    __slots__ = ("done", "error", "prompt", "text")

    def __init__(self, prompt: str) -> None:
        self.prompt = prompt
        self.done = threading.Event()
        self.text: Any = None
        self.error: BaseException | None = None


class LLMClient:
    """Calls one chat model in one worker thread, within a time budget, behind a breaker.

    ``timeout_s``: the longest an operation waits for the model, all its calls together (see
    :meth:`budget`; a call outside one gets ``timeout_s`` of its own). ``probe_interval_s``:
    how long the model stays offline after a timeout. ``clock``: monotonic seconds (tests).
    """

    def __init__(self, llm: Any, *, timeout_s: float, max_reply_chars: int,
                 probe_interval_s: float = DEFAULT_PROBE_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not (hasattr(llm, "invoke") or callable(llm)):
            from .errors import InvalidInputError

            raise InvalidInputError(
                "The 'llm' parameter of ScrubJayMemory must be a LangChain chat model (with "
                f".invoke) or a callable str -> str. Got {type(llm).__name__} instead.")
        self.llm = llm
        self.timeout_s = timeout_s
        self.max_reply_chars = max_reply_chars
        self.probe_interval_s = probe_interval_s
        self.calls = 0
        self._clock = clock
        self._warned = False
        self._lock = threading.Lock()
        self._local = threading.local()
        self._calls: queue.Queue[_Call] = queue.Queue(maxsize=1)
        self._worker: threading.Thread | None = None
        self._running: _Call | None = None  # the call the worker has not finished yet
        self._offline_until: float | None = None  # set by a timeout, cleared by an answer

    @property
    def offline(self) -> bool:
        """Whether the breaker is open: the last call timed out and no probe has answered."""
        with self._lock:
            return self._offline_until is not None

    @contextlib.contextmanager
    def budget(self) -> Iterator[None]:
        """The calls made in this block (on this thread) share ``timeout_s`` in total.

        Nested blocks share the outermost one's budget.
        """
        if getattr(self._local, "deadline", None) is not None:
            yield
            return
        self._local.deadline = self._clock() + self.timeout_s
        try:
            yield
        finally:
            self._local.deadline = None

    def complete(self, prompt: str) -> str:
        """Return the model's reply text, or raise :class:`LLMError`."""
        call = self._submit(prompt)
        deadline = getattr(self._local, "deadline", None)
        wait = self.timeout_s if deadline is None else deadline - self._clock()
        if not call.done.wait(max(0.0, wait)):
            with self._lock:
                self._offline_until = self._clock() + self.probe_interval_s
            logger.warning("The chat model did not answer within the operation's budget of "
                           "%g s (config.llm.timeout_s): offline, using the offline fallbacks, "
                           "until a call after %g s (config.llm.probe_interval_s) answers.",
                           self.timeout_s, self.probe_interval_s)
            raise self._fail(LLMError(f"The chat model did not answer within {self.timeout_s:g} "
                                      f"s (config.llm.timeout_s, one budget per operation)."))
        with self._lock:
            if self._offline_until is not None:
                self._offline_until = None
                logger.warning("The chat model answered a probe: online again.")
        if call.error is not None:
            exc = call.error
            err = LLMError(f"The chat model raised {type(exc).__name__}: {exc}")
            err.__cause__ = exc
            # the log names the type only: the exception's message may quote the prompt
            raise self._fail(err, f"The chat model raised {type(exc).__name__}.")
        text = call.text
        if not isinstance(text, str) or not text.strip():
            raise self._fail(LLMError("The chat model returned an empty reply."))
        if len(text) > self.max_reply_chars:
            raise self._fail(LLMError(f"The chat model's reply has {len(text)} characters, more "
                                      f"than config.llm.max_reply_chars={self.max_reply_chars}."))
        try:
            return check_reply_text(text, "reply")
        except LLMError as err:
            raise self._fail(err) from None

    def _submit(self, prompt: str) -> _Call:
        """Hand ``prompt`` to the worker, or raise :class:`LLMError` without calling."""
        with self._lock:
            now = self._clock()
            if self._offline_until is not None and now < self._offline_until:
                raise self._fail(LLMError(
                    f"The chat model is offline since a call timed out; the next call after "
                    f"{self._offline_until - now:.0f} s probes it (config.llm.probe_interval_s)."))
            if self._running is not None:
                raise self._fail(LLMError("The chat model has not answered an earlier call "
                                          "that timed out; no new call is made until it does."))
            deadline = getattr(self._local, "deadline", None)
            if deadline is not None and deadline <= now:
                raise self._fail(LLMError(f"The operation's chat-model budget of "
                                          f"{self.timeout_s:g} s (config.llm.timeout_s) is "
                                          f"spent."))
            self.calls += 1
            call = _Call(prompt)
            self._running = call
            self._calls.put_nowait(call)  # never full: one call at a time
            if self._worker is None:
                self._worker = threading.Thread(target=self._work, name="scrubjay-llm",
                                                daemon=True)
                self._worker.start()
            return call

    def _work(self) -> None:
        """The worker: runs the calls one by one; exits once idle for :data:`WORKER_IDLE_S`."""
        while True:
            try:
                call = self._calls.get(timeout=WORKER_IDLE_S)
            except queue.Empty:
                with self._lock:
                    if self._calls.empty():
                        self._worker = None
                        return
                continue
            try:
                reply = (self.llm.invoke(call.prompt) if hasattr(self.llm, "invoke")
                         else self.llm(call.prompt))
                call.text = _content(reply)
            except BaseException as exc:  # noqa: BLE001 - reported to the caller
                call.error = exc
            finally:
                with self._lock:
                    self._running = None
                call.done.set()

    def _fail(self, err: LLMError, logged: str | None = None) -> LLMError:
        """Log ``err`` (or ``logged``, its text-free form) once at WARNING, then at DEBUG."""
        said = logged if logged is not None else str(err)
        if not self._warned:
            self._warned = True
            logger.warning("LLM unavailable, using the offline fallbacks (%s). Further failures "
                           "are logged at DEBUG.", said)
        else:
            logger.debug("LLM call failed, offline fallback used: %s", said)
        setattr(err, "_scrubjay_logged", True)  # noqa: B010 - not an attribute of LLMError
        return err

    def note_parse_failure(self, err: LLMError) -> None:
        """Log a malformed reply the same way as a failed call (once: an error this client
        raised is logged already)."""
        if not getattr(err, "_scrubjay_logged", False):
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
        raise LLMError(f"The chat model's reply is not strict JSON ({exc}).") from None
    if not isinstance(obj, dict):
        raise LLMError(f"The chat model's reply must be a JSON object. Got "
                       f"{type(obj).__name__} instead.")
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
        except ValueError:
            raise LLMError(f"The chat model's {key!r} must be a number. Got a str that is "
                           "not one.") from None
    if not isinstance(value, (int, float)):
        raise LLMError(f"The chat model's {key!r} must be a number. Got "
                       f"{type(value).__name__} instead.")
    try:
        out = float(value)
    except OverflowError as exc:
        raise LLMError(f"The chat model's {key!r} is out of range.") from exc
    if not math.isfinite(out):
        raise LLMError(f"The chat model's {key!r} must be finite. Got {out!r} instead.")
    return out
