"""Retroactive Contextual Integration (paper §3.5, Eq. 9-12, Proposition 1).

One event ``n`` updates every memory whose what-embedding is close to it:

1. ``rho_i = cos(w_what_i, w_what_n)``; memories with ``rho_i <= theta`` are untouched;
   ``alpha_i = (rho_i - theta) / (1 - theta)`` in (0, 1].
2. One set of deltas for the event (one LLM call, or the offline parser), clipped at parse time
   to ``|dV| <= dv_max``, ``|dpi| <= dpi_max``, ``dtau in [dtau_min, dtau_max]``.
3. For each affected memory::

       V   <- max(0, V + eta_V alpha dV)
       pi  <- clip(pi + eta_pi alpha dpi, pi_min, 1)
       tau <- clip(tau * max(0.1, 1 + eta_tau alpha dtau), tau_min, tau_max)
       w   <- L2(w + eta_w alpha (w_n - w))

Proposition 1: ``|V' - V| <= eta_V dv_max``, ``|pi' - pi| <= eta_pi dpi_max``, ``tau'`` stays in
``[tau_min, tau_max]``, and the what-update is a contraction toward ``w_n`` (before the
renormalisation) with constant ``1 - eta_w alpha``. (The paper clips pi at 0; we clip at
``pi_min > 0`` so that pi stays in (0, 1] as §3.2 requires.)
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from .config import RCIConfig
from .errors import LLMError
from .llm import check_reply_text, finite_float, parse_json_object, strip_controls
from .types import Deltas
from .unit import l2_normalize

__all__ = [
    "Updated",
    "affinities",
    "apply_updates",
    "clip_deltas",
    "event_key",
    "fallback_deltas",
    "parse_deltas",
]


def affinities(what: NDArray[np.float32], w_n: NDArray[np.float32],
               theta: float) -> tuple[NDArray[np.intp], NDArray[np.float64]]:
    """Indices of rows with ``cos > theta`` and their ``alpha``, strongest first."""
    if len(what) == 0:
        return np.zeros(0, dtype=np.intp), np.zeros(0)
    rho = what.astype(np.float64) @ w_n.astype(np.float64)
    idx = np.flatnonzero(rho > theta)
    alpha = (rho[idx] - theta) / (1.0 - theta)
    order = np.argsort(-alpha, kind="stable")
    return idx[order], np.minimum(1.0, alpha[order])


def clip_deltas(delta_value: float, delta_pi: float, delta_tau: float, summary: str,
                cfg: RCIConfig) -> Deltas:
    """Clip raw deltas into the configured ranges (paper: at parse time)."""
    return Deltas(delta_value=float(np.clip(delta_value, -cfg.dv_max, cfg.dv_max)),
                  delta_pi=float(np.clip(delta_pi, -cfg.dpi_max, cfg.dpi_max)),
                  delta_tau=float(np.clip(delta_tau, cfg.dtau_min, cfg.dtau_max)),
                  summary=summary[:500])


def parse_deltas(reply: str, cfg: RCIConfig) -> Deltas:
    """Parse the model's strict-JSON deltas (paper App. F.4) and clip them; LLMError if off."""
    obj = parse_json_object(reply)
    summary = obj.get("summary", "")
    if not isinstance(summary, str):
        raise LLMError("The chat model's 'summary' must be a string.")
    summary = strip_controls(check_reply_text(summary, "'summary'"))
    return clip_deltas(finite_float(obj, "delta_value"), finite_float(obj, "delta_pi"),
                       finite_float(obj, "delta_tau"), summary, cfg)


# The offline delta parser (chosen; the paper only says a deterministic parser stands in).
# Invalidating words: the older, related memories lose value and perish faster.
_INVALIDATE = re.compile(
    r"\b(no longer|not anymore|any ?more|cancel(?:l?ed|s)?|moved|changed|replaced|instead|"
    r"switched|stopped|quit|left|ended|over|deprecated|outdated|obsolete|wrong|actually|"
    r"now|new|former(?:ly)?|used to|postponed|rescheduled)\b", re.IGNORECASE)
# Reinforcing words: the older memories are confirmed and last longer.
_REINFORCE = re.compile(r"\b(still|confirm(?:ed|s)?|again|always|permanent(?:ly)?|as before|"
                        r"unchanged|same as)\b", re.IGNORECASE)

#: (dV, dpi, dtau) of the offline parser per case (chosen).
FALLBACK_INVALIDATE = (-0.8, 0.3, -0.5)
FALLBACK_REINFORCE = (0.2, -0.1, 0.5)
#: New information with no cue word: newer evidence supersedes older (chosen: the old value
#: drops by ``eta_V * alpha``, so the stored new memory outranks it; with -0.5 a quarter of
#: superseded FactConsolidation facts still came first). Applied only to the memories the
#: supersession detector judges replaced (:attr:`Deltas.replaced_only`): without a cue word,
#: a memory that is merely close ("the capital of France" to "the capital of Peru") is not
#: news about it.
FALLBACK_SUPERSEDE = (-1.0, 0.2, 0.0)


def event_key(new_info: str, context: str, at_s: float) -> str:
    """The key of one RCI event: what was learnt, in which context, at which time.

    Each updated memory keeps the key of the latest event that wrote it, so that the same
    event run again (a retry after an update that failed part-way) skips the memories it
    has already updated instead of applying its deltas to them twice.

    >>> event_key("The standup moved to 10:00", "team chat", 1.0) == event_key(
    ...     "The standup moved to 10:00", "team chat", 1.0)
    True
    >>> event_key("The standup moved to 10:00", "team chat", 2.0) == event_key(
    ...     "The standup moved to 10:00", "team chat", 1.0)
    False
    """
    payload = "\x1f".join((new_info, context, repr(float(at_s))))
    return hashlib.blake2b(payload.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def fallback_deltas(new_info: str, cfg: RCIConfig) -> Deltas:
    """Deterministic deltas from cue words when no chat model answers.

    >>> fallback_deltas("The team standup was cancelled", RCIConfig()).delta_value
    -0.8
    >>> fallback_deltas("I still live in Lyon", RCIConfig()).delta_value
    0.2
    """
    replaced_only = False
    if _REINFORCE.search(new_info) and not re.search(r"\bno longer\b", new_info, re.IGNORECASE):
        dv, dpi, dtau = FALLBACK_REINFORCE
        summary = "offline: reinforcing cue"
    elif _INVALIDATE.search(new_info):
        dv, dpi, dtau = FALLBACK_INVALIDATE
        summary = "offline: invalidating cue"
    else:
        dv, dpi, dtau = FALLBACK_SUPERSEDE
        summary = "offline: newer related evidence supersedes the memories it replaces"
        replaced_only = True
    return replace(clip_deltas(dv, dpi, dtau, summary, cfg), replaced_only=replaced_only)


@dataclass(frozen=True, slots=True, kw_only=True)
class Updated:
    """New parameters for the affected rows, aligned with the ``alpha`` passed in."""

    value: NDArray[np.float64]
    pi: NDArray[np.float64]
    tau_s: NDArray[np.float64]
    what: NDArray[np.float32]


def apply_updates(value: NDArray[np.floating], pi: NDArray[np.floating],
                  tau_s: NDArray[np.floating], what: NDArray[np.floating],
                  w_n: NDArray[np.floating], alpha: NDArray[np.floating], deltas: Deltas,
                  cfg: RCIConfig, *, pi_min: float, tau_min_s: float,
                  tau_max_s: float, gate: NDArray[np.bool_] | None = None) -> Updated:
    """The four update rules (paper Eq. 9-12), vectorised over the affected memories.

    ``gate`` (aligned with ``alpha``) limits the value, pi and tau rules to the rows it marks
    (:attr:`Deltas.replaced_only`); the what-update applies to every row.
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    a = alpha if gate is None else alpha * np.asarray(gate, dtype=np.float64)
    new_value = np.maximum(0.0, np.asarray(value, np.float64)
                           + cfg.eta_value * a * deltas.delta_value)
    new_pi = np.clip(np.asarray(pi, np.float64) + cfg.eta_pi * a * deltas.delta_pi,
                     pi_min, 1.0)
    factor = np.maximum(0.1, 1.0 + cfg.eta_tau * a * deltas.delta_tau)
    new_tau = np.clip(np.asarray(tau_s, np.float64) * factor, tau_min_s, tau_max_s)
    w = np.asarray(what, np.float64)
    moved = w + (cfg.eta_what * alpha)[:, None] * (np.asarray(w_n, np.float64)[None, :] - w)
    return Updated(value=new_value, pi=new_pi, tau_s=new_tau, what=l2_normalize(moved))
