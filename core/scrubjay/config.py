"""Hyperparameters of ScrubJay-MEM, one frozen dataclass per mechanism.

Every constant of the paper (``../shared/SPEC.md``) is a field here. A field whose value the
paper states cites its section; a field the paper leaves open is marked **chosen** with the
reason. All durations are in seconds and say so in their names.

>>> cfg = ScrubJayConfig()
>>> cfg.decay.stale_ratio
0.5
>>> ScrubJayConfig(rci=RCIConfig(theta=0.7)).rci.theta
0.7
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from typing import Any

from .errors import ConfigError
from .fusion import LEXICAL_WEIGHT

__all__ = [
    "BufferConfig",
    "ClassifierConfig",
    "ConsolidationConfig",
    "DecayConfig",
    "FusionConfig",
    "GraphConfig",
    "KeywordRule",
    "LLMConfig",
    "RCIConfig",
    "RetentionPolicy",
    "ScrubJayConfig",
    "SearchConfig",
    "SupersessionConfig",
    "WeightConfig",
]

HOUR_S = 3600.0
DAY_S = 86_400.0
YEAR_S = 365.25 * DAY_S


def _check(cond: bool, owner: str, name: str, must: str, got: Any) -> None:
    if not cond:
        raise ConfigError(f"The {name!r} parameter of {owner} must be {must}. Got {got!r} instead.")


def _known_zone(name: str) -> bool:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


def _finite(*values: float) -> bool:
    return all(isinstance(v, (int, float)) and math.isfinite(v) for v in values)


@dataclass(frozen=True, slots=True, kw_only=True)
class FusionConfig:
    """The fused retrieval vector ``h_i`` of the memory unit (paper §3.1, Eq. 2)."""

    what: float = 0.55
    """Weight of ``w_what`` in ``h_i`` (paper Eq. 2)."""
    where: float = 0.35
    """Weight of ``w_where`` in ``h_i`` (paper Eq. 2)."""
    gate: float = 0.10
    """Weight of the gate vector ``g_i`` (paper Eq. 2); chosen gate: ``L2(w_what * w_where)``."""
    period: float = 1.0
    """Period P of the log-time offsets written into ``h[0]`` and ``h[1]`` (chosen: 1, so the
    offset stays in [0, 1) like the unit-norm coordinates it is added to)."""

    def __post_init__(self) -> None:
        _check(_finite(self.what, self.where, self.gate) and min(self.what, self.where,
               self.gate) >= 0 and self.what + self.where + self.gate > 0, "FusionConfig",
               "what/where/gate", "finite, >= 0 and not all 0", (self.what, self.where, self.gate))
        _check(_finite(self.period) and self.period > 0, "FusionConfig", "period", "> 0",
               self.period)


@dataclass(frozen=True, slots=True, kw_only=True)
class KeywordRule:
    """One row of the paper's keyword fallback table (SPEC §2)."""

    label: str
    pi: float
    tau_s: float
    keywords: tuple[str, ...]


#: The paper's keyword fallback, first match wins (SPEC §2, paper App. F.3).
PAPER_KEYWORD_RULES: tuple[KeywordRule, ...] = (
    KeywordRule(label="ephemeral", pi=0.9, tau_s=2 * HOUR_S,
                keywords=("today", "immediate", "right now", "session", "temporary")),
    KeywordRule(label="procedural", pi=0.3, tau_s=10 * DAY_S,
                keywords=("how to", "steps", "process", "procedure", "workflow")),
    KeywordRule(label="task_specific", pi=0.6, tau_s=24 * HOUR_S,
                keywords=("task", "ticket", "issue", "meeting", "project")),
)

LABELS: tuple[str, ...] = ("factual", "procedural", "task_specific", "ephemeral")


@dataclass(frozen=True, slots=True, kw_only=True)
class ClassifierConfig:
    """Perishability classification ``phi(text, context) -> (label, pi, tau)`` (paper §3.2)."""

    keyword_rules: tuple[KeywordRule, ...] = PAPER_KEYWORD_RULES
    """Keyword fallback rules, first match wins (paper App. F.3)."""
    default_label: str = "factual"
    """Label when no rule matches (paper)."""
    default_pi: float = 0.1
    """pi when no rule matches (paper: ~0.1)."""
    default_tau_s: float = 45 * DAY_S
    """tau when no rule matches (paper: 45 days)."""
    context_perturbation_max: float = 0.05
    """Largest pi perturbation from what/where divergence for the default label (paper: <= 0.05;
    chosen form: ``0.05 * clip(1 - cos(w_what, w_where), 0, 1)`` when a context is given)."""
    tau_min_s: float = 60.0
    """Lower clip of tau (chosen: one minute, the shortest horizon worth storing)."""
    tau_max_s: float = 5 * YEAR_S
    """Upper clip of tau (chosen: five years)."""
    pi_min: float = 1e-3
    """Lower clip of pi, keeping it in (0, 1] as the paper requires (chosen)."""
    offline: str = "estimator"
    """Offline estimator when no LLM is configured or it fails: ``"estimator"`` (the trained model
    shipped with the package, see :mod:`scrubjay.estimator`) or ``"keyword"`` (the paper's rule,
    for reproducing the paper)."""
    llm_clip_decades: float | None = None
    """When set, an LLM's answer is kept within this many decades of the estimator's lifetime
    (its tau is clipped so that the stale age lies in ``[L / 10^d, L * 10^d]``). ``None``: the
    LLM's answer is used as the paper has it (only range-clipped)."""

    def __post_init__(self) -> None:
        _check(_finite(self.tau_min_s, self.tau_max_s) and 0 < self.tau_min_s < self.tau_max_s,
               "ClassifierConfig", "tau_min_s/tau_max_s", "finite with 0 < tau_min_s < tau_max_s",
               (self.tau_min_s, self.tau_max_s))
        _check(_finite(self.pi_min) and 0 < self.pi_min < 1, "ClassifierConfig", "pi_min",
               "in (0, 1)", self.pi_min)
        _check(self.default_label in LABELS, "ClassifierConfig", "default_label",
               f"one of {LABELS}", self.default_label)
        _check(_finite(self.default_pi) and 0 < self.default_pi <= 1, "ClassifierConfig",
               "default_pi", "in (0, 1]", self.default_pi)
        _check(_finite(self.context_perturbation_max) and 0 <= self.context_perturbation_max < 1,
               "ClassifierConfig", "context_perturbation_max", "in [0, 1)",
               self.context_perturbation_max)
        for rule in self.keyword_rules:
            _check(rule.label in LABELS and 0 < rule.pi <= 1 and rule.tau_s > 0,
                   "ClassifierConfig", "keyword_rules", "rules with a known label, pi in (0, 1] "
                   "and tau_s > 0", rule)
        _check(self.offline in ("estimator", "keyword"), "ClassifierConfig", "offline",
               "'estimator' or 'keyword'", self.offline)
        _check(self.llm_clip_decades is None or (_finite(self.llm_clip_decades)
                                                 and self.llm_clip_decades > 0),
               "ClassifierConfig", "llm_clip_decades", "None or > 0", self.llm_clip_decades)


@dataclass(frozen=True, slots=True, kw_only=True)
class DecayConfig:
    """Utility decay ``U = V exp(-pi (t_q - t_i) / tau)`` (paper §3.2, Eq. 3)."""

    default_value: float = 1.0
    """Base value V of a new memory (chosen: 1, so U/V reads as a fraction)."""
    stale_ratio: float = 0.5
    """A hit is *stale* when ``U / V < stale_ratio`` at the query time (chosen: 0.5, the
    half-life: the memory has lost half its utility; at ``age = ln 2 * tau / pi``)."""
    windows: bool = True
    """Read a validity window stated in each new memory's text (:mod:`scrubjay.windows`:
    "tonight from 10pm to midnight", "tomorrow at 9am", "for two nights") into its
    ``valid_from_s`` / ``valid_until_s``: a memory whose window has ended is stale with that
    reason, and one about a future event does not decay before the event. Off: every memory
    is valid from when it was told, with no stated end (the paper)."""
    time_zone: str = "UTC"
    """The IANA time zone in which the texts' "tonight" and "9am" are meant."""

    def __post_init__(self) -> None:
        _check(isinstance(self.windows, bool), "DecayConfig", "windows", "a bool", self.windows)
        _check(isinstance(self.time_zone, str) and _known_zone(self.time_zone), "DecayConfig",
               "time_zone", "an IANA time zone name such as 'Europe/Berlin'", self.time_zone)
        _check(_finite(self.default_value) and self.default_value > 0, "DecayConfig",
               "default_value", "> 0", self.default_value)
        _check(_finite(self.stale_ratio) and 0 < self.stale_ratio < 1, "DecayConfig",
               "stale_ratio", "in (0, 1)", self.stale_ratio)


#: Keyword biases of the adaptive weights (SPEC §3). Component -> (bias, words).
PAPER_WEIGHT_BIASES: tuple[tuple[str, float, tuple[str, ...]], ...] = (
    ("when", 1.5, ("latest", "recent", "today", "stale")),
    ("where", 1.0, ("context", "project", "session", "workspace")),
    ("what", 0.8, ("what", "which", "fact", "detail", "remember")),
    ("graph", 0.8, ("related", "connected", "neighbor", "link")),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class WeightConfig:
    """Query-adaptive weights ``[a, b, g, d] = softmax(...)`` (paper §3.3, Eq. 6)."""

    base_logits: tuple[float, float, float, float] = (1.5, 1.0, 1.0, 1.0)
    """Base logits for what, where, when, graph (paper Eq. 6)."""
    what_norm_coef: float = 0.20
    """Coefficient of ``||e_q||`` in the what logit (paper Eq. 6)."""
    where_norm_coef: float = 0.10
    """Coefficient of ``||c_q||`` in the where logit (paper Eq. 6)."""
    when_log_coef: float = 0.2
    """Coefficient of ``log(dt_q + 1)`` in the when logit (paper Eq. 6)."""
    when_log_cap: float = 2.0
    """Cap of that term (paper Eq. 6). ``dt_q`` is the time from the newest memory to the query
    (chosen; SPEC §3)."""
    keyword_biases: tuple[tuple[str, float, tuple[str, ...]], ...] = PAPER_WEIGHT_BIASES
    """Keyword biases per component (paper §3.3); a word counts once per component."""

    def __post_init__(self) -> None:
        _check(len(self.base_logits) == 4 and _finite(*self.base_logits), "WeightConfig",
               "base_logits", "four finite numbers", self.base_logits)
        _check(_finite(self.what_norm_coef, self.where_norm_coef, self.when_log_coef,
                       self.when_log_cap), "WeightConfig", "coefficients", "finite",
               (self.what_norm_coef, self.where_norm_coef, self.when_log_coef, self.when_log_cap))
        for comp, bias, _words in self.keyword_biases:
            _check(comp in ("what", "where", "when", "graph") and _finite(bias), "WeightConfig",
                   "keyword_biases", "(component, finite bias, words) triples", comp)
        # held as nested tuples (a table given with lists, e.g. read from JSON): immutable and
        # hashable, so that scoring can cache its lookup structure per table
        object.__setattr__(self, "keyword_biases", tuple(
            (comp, bias, tuple(words)) for comp, bias, words in self.keyword_biases))


@dataclass(frozen=True, slots=True, kw_only=True)
class GraphConfig:
    """The typed episodic graph and its one-hop bonus (paper §3.4, Eq. 7-8)."""

    weight_semantic: float = 0.40
    """Weight of the semantic edge ``e_S`` in ``e_ij`` (paper Eq. 7)."""
    weight_contextual: float = 0.30
    """Weight of the contextual edge ``e_C`` (paper Eq. 7)."""
    weight_temporal: float = 0.30
    """Weight of the temporal edge ``e_T`` (paper Eq. 7)."""
    theta_semantic: float = 0.75
    """``e_S = cos(what_i, what_j)`` only when at least this (chosen, from the wordllama
    calibration in SPEC: above the 99th percentile of unrelated pairs, below paraphrases)."""
    theta_contextual: float = 0.75
    """``e_C = cos(where_i, where_j)`` only when at least this (chosen, as theta_semantic)."""
    lambda_temporal_per_s: float = 1.0 / HOUR_S
    """Rate of the temporal edge ``exp(-lambda |t_i - t_j|)`` (chosen: one per hour)."""
    delta_temporal_s: float = 24 * HOUR_S
    """No temporal edge beyond this gap (chosen: one day)."""
    max_neighbors: int = 16
    """At most this many edges per memory, strongest kept (chosen: k_graph = 16)."""
    min_edge_weight: float = 1e-3
    """Edges weaker than this are not stored (chosen: below it the bonus is noise)."""

    def __post_init__(self) -> None:
        _check(_finite(self.weight_semantic, self.weight_contextual, self.weight_temporal)
               and min(self.weight_semantic, self.weight_contextual, self.weight_temporal) >= 0,
               "GraphConfig", "edge weights", "finite and >= 0",
               (self.weight_semantic, self.weight_contextual, self.weight_temporal))
        _check(_finite(self.theta_semantic, self.theta_contextual)
               and -1 <= self.theta_semantic <= 1 and -1 <= self.theta_contextual <= 1,
               "GraphConfig", "theta_semantic/theta_contextual", "in [-1, 1]",
               (self.theta_semantic, self.theta_contextual))
        _check(_finite(self.lambda_temporal_per_s, self.delta_temporal_s)
               and self.lambda_temporal_per_s >= 0 and self.delta_temporal_s >= 0,
               "GraphConfig", "lambda_temporal_per_s/delta_temporal_s", ">= 0",
               (self.lambda_temporal_per_s, self.delta_temporal_s))
        _check(isinstance(self.max_neighbors, int) and 0 <= self.max_neighbors <= 256,
               "GraphConfig", "max_neighbors", "an int in [0, 256]", self.max_neighbors)


@dataclass(frozen=True, slots=True, kw_only=True)
class RCIConfig:
    """Retroactive Contextual Integration (paper §3.5, Eq. 9-12, Proposition 1)."""

    theta: float = 0.5
    """Affinity threshold ``theta_RCI`` on ``cos(what_i, what_n)`` (chosen: 0.5, below the
    wordllama 'related update' similarity 0.68, above its 'same topic' 0.39 and 90th percentile
    of unrelated pairs 0.31. At 0.6, 13 of 74 superseded FactConsolidation facts were never
    touched by their replacement; ``docs/benchmarks.md``)."""
    eta_value: float = 0.5
    """Learning rate of the value update (chosen)."""
    eta_pi: float = 0.5
    """Learning rate of the perishability update (chosen)."""
    eta_tau: float = 0.5
    """Learning rate of the horizon update (chosen)."""
    eta_what: float = 0.2
    """Learning rate of the what-embedding contraction (chosen)."""
    dv_max: float = 1.0
    """Clip of ``|dV|`` at parse time (chosen)."""
    dpi_max: float = 0.5
    """Clip of ``|dpi|`` at parse time (chosen)."""
    dtau_min: float = -0.9
    """Lower clip of the relative horizon change (chosen; ``1 + eta_tau * dtau_min >= 0.1``)."""
    dtau_max: float = 2.0
    """Upper clip of the relative horizon change (chosen)."""
    max_affected: int = 100_000
    """Safety cap on memories touched by one event (chosen; far above realistic use)."""

    def __post_init__(self) -> None:
        _check(_finite(self.theta) and -1 <= self.theta < 1, "RCIConfig", "theta", "in [-1, 1)",
               self.theta)
        for name in ("eta_value", "eta_pi", "eta_tau", "eta_what"):
            v = getattr(self, name)
            _check(_finite(v) and 0 <= v <= 1, "RCIConfig", name, "in [0, 1]", v)
        _check(_finite(self.dv_max, self.dpi_max) and self.dv_max >= 0 and self.dpi_max >= 0,
               "RCIConfig", "dv_max/dpi_max", ">= 0", (self.dv_max, self.dpi_max))
        _check(_finite(self.dtau_min, self.dtau_max) and self.dtau_min <= 0 <= self.dtau_max
               and 1 + self.eta_tau * self.dtau_min >= 0.1, "RCIConfig", "dtau_min/dtau_max",
               "dtau_min <= 0 <= dtau_max with 1 + eta_tau * dtau_min >= 0.1",
               (self.dtau_min, self.dtau_max))
        _check(isinstance(self.max_affected, int) and self.max_affected >= 1, "RCIConfig",
               "max_affected", "an int >= 1", self.max_affected)


@dataclass(frozen=True, slots=True, kw_only=True)
class BufferConfig:
    """Prospective memory buffer (paper §3.6, Eq. 13, Proposition 2)."""

    size: int = 64
    """K, the number of memories loaded for a task (chosen)."""
    theta: float = 0.55
    """``theta_B``: a buffered hit is served when its score is at least this (chosen)."""
    task_what_scale: float = 4.0
    """``v_T = task_what_scale * Enc(task)`` (chosen: a light, parameter-free task encoder)."""
    task_where_scale: float = 2.0
    """``u_T = task_where_scale * Enc(task context)`` (chosen)."""
    task_bias: float = -1.0
    """``b_T`` (chosen: an unrelated memory gets P ~ 0.27, a close one ~ 0.95)."""

    def __post_init__(self) -> None:
        _check(isinstance(self.size, int) and 1 <= self.size <= 100_000, "BufferConfig", "size",
               "an int in [1, 100000]", self.size)
        _check(_finite(self.theta, self.task_what_scale, self.task_where_scale, self.task_bias),
               "BufferConfig", "theta/scales/bias", "finite",
               (self.theta, self.task_what_scale, self.task_where_scale, self.task_bias))


@dataclass(frozen=True, slots=True, kw_only=True)
class RetentionPolicy:
    """What consolidation may never delete (paper §8, ethics: perishability is advisory)."""

    protected_labels: frozenset[str] = frozenset()
    """Labels whose memories are never pruned."""
    protected_metadata_key: str = "protected"
    """A memory whose user metadata has this key set to True is never pruned."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsolidationConfig:
    """Value-weighted consolidation at a session end (paper §3.8, Eq. 14)."""

    eps: float = 0.01
    """Keep a memory whose utility exceeds this (chosen)."""
    eps_graph: float = 0.05
    """... or whose hub score ``sum_j e_ij U_j`` exceeds this (chosen; the query-free form of the
    graph bonus, with S' = 1)."""
    retention: RetentionPolicy = field(default_factory=RetentionPolicy)
    """Protected memories survive whatever their utility."""

    def __post_init__(self) -> None:
        _check(_finite(self.eps, self.eps_graph) and self.eps >= 0 and self.eps_graph >= 0,
               "ConsolidationConfig", "eps/eps_graph", ">= 0", (self.eps, self.eps_graph))


@dataclass(frozen=True, slots=True, kw_only=True)
class LLMConfig:
    """How chat models are called for classification, RCI and annotation."""

    timeout_s: float = 30.0
    """The longest one operation (``add``, ``add_many``, ``integrate``) waits for the chat
    model, all its calls together; a call cut off by it counts as failed, the offline fallbacks
    are used and the model is offline until a probe answers (chosen)."""
    probe_interval_s: float = 60.0
    """After a call timed out, the chat model is not called (the offline fallbacks are used)
    for this many seconds; the next call then probes it, and the model is back once a probe
    answers (chosen: a hung model costs one timeout a minute, not one per operation; 0 probes
    at every call)."""
    batch_items: int = 32
    """An ``add_many`` asks the model about this many memories per call, once to classify them
    and once to annotate them (one memory: the paper's prompts; chosen: 32 annotations of
    at most ``scrubjay.annotation.MAX_ANNOTATION_CHARS`` fit ``max_reply_chars`` and a chat
    model's usual 4,096-token answer)."""
    annotate: bool = True
    """Append the future-oriented annotation (paper §3.7) when an LLM is configured."""
    max_reply_chars: int = 20_000
    """Replies longer than this are rejected as malformed (chosen)."""

    def __post_init__(self) -> None:
        _check(_finite(self.timeout_s) and self.timeout_s > 0, "LLMConfig", "timeout_s", "> 0",
               self.timeout_s)
        _check(_finite(self.probe_interval_s) and self.probe_interval_s >= 0, "LLMConfig",
               "probe_interval_s", ">= 0", self.probe_interval_s)
        _check(isinstance(self.batch_items, int) and not isinstance(self.batch_items, bool)
               and 1 <= self.batch_items <= 1024, "LLMConfig", "batch_items",
               "an int in [1, 1024]", self.batch_items)


@dataclass(frozen=True, slots=True, kw_only=True)
class SupersessionConfig:
    """Supersession on add: a new memory that gives an older one's slot a new value marks the
    older one superseded (:mod:`scrubjay.superseding`, :mod:`scrubjay.supersession`)."""

    enabled: bool = True
    """Run the detector on every add (``integrate`` stores its news through the same add)."""
    detector: str = "rules"
    """``"rules"``: :data:`scrubjay.supersession.DEFAULT_MODEL` (the slot lexicon, gates and
    a six-feature score); ``"learned"``: :func:`scrubjay.update_model.default_update_model`
    (slot-independent features; more precise on unseen slots, fewer updates caught). Their
    figures: docs/supersession.md."""
    candidates: int = 10
    """Older memories judged per new memory: its nearest by what-cosine (chosen: the labelled
    pairs' replaced memory is among a new memory's 10 nearest in every scenario timeline of
    the training split; more candidates cost more parsing and more chances of a wrong mark)."""
    confirm: bool = True
    """With a chat model, show it the candidates scoring at least the model's ``llm_floor``
    in ONE call per batch; its answer decides, the offline decision is the fallback."""

    def __post_init__(self) -> None:
        _check(isinstance(self.candidates, int) and not isinstance(self.candidates, bool)
               and 0 <= self.candidates <= 1000, "SupersessionConfig", "candidates",
               "an int in [0, 1000]", self.candidates)
        _check(self.detector in ("rules", "learned"), "SupersessionConfig", "detector",
               "'rules' or 'learned'", self.detector)


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchConfig:
    """Candidate generation in front of exact scoring."""

    candidates: int = 256
    """Candidates taken from Chroma per channel (what, where) before exact re-scoring: by an
    embedded relevance search with a context above ``scan_max``, by server searches with paper
    ranking and by ``prepare`` on a server. A server relevance search, and an embedded one
    without context above ``scan_max``, start from ``2 * k`` and widen up to this many only
    when a memory left out could still enter the top k (chosen)."""
    graph_neighbors: bool = True
    """Pull the graph neighbours of candidates in as candidates too."""
    ranking: str = "relevance"
    """``"relevance"`` (chosen default): rank by what/where relevance (mixed by the Eq. 6
    weights) times the memory's value ``V / V0``, so RCI-superseded memories sink, while time
    decay sets the ``stale`` flag; hits still carry the Eq. 5 score and its breakdown.
    ``"paper"``: rank by the Eq. 5 score, as the paper does; there a fresh but unrelated
    memory can outrank a relevant older one (``docs/benchmarks.md`` measures both)."""
    mirror: bool | None = None
    """Keep an in-memory mirror of the namespace and score exactly over all memories. ``None``:
    on for embedded (``path=``) stores, off for client/server. Against a server, a mirror reads
    the whole namespace at open and links and scores in this process; the namespace's change
    log (:mod:`scrubjay.changelog`), which every process's writes feed, keeps it current with
    the other processes' writes: each operation first applies those made since the last one
    (a batch's ingest then costs about what an embedded one does, where without a mirror it
    queries the server for every new memory's neighbours, about 0.2 ms each whatever the
    store holds)."""
    scan_max: int | None = 20_000
    """Mirrors of at most this many memories are scanned exactly, by relevance searches and
    when linking new memories; larger ones take candidates from Chroma's HNSW index (what,
    where and, for linking, the nearest in time) and score those exactly from the mirror.
    ``None``: always scan. Paper ranking always scans (its graph bound needs every row).
    (Chosen: a scan of 20k x 256 float32 costs about what an HNSW query does;
    ``scrubjay bench perf`` reports the recall of the HNSW path against the scan.)"""

    superseded_weight: float = 0.5
    """Default ranking: a superseded memory's key is multiplied by ``1 - superseded_weight``
    (chosen; :mod:`scrubjay.timeline`, docs/ranking.md)."""
    stale_weight: float = 0.0
    """Default ranking: a memory stale otherwise (decayed, window ended) is multiplied by
    ``1 - stale_weight``. Off by default: 0.25 lowered LoCoMo evidence recall@5 from 28.5 to
    23.2 % and TGT combined from 58.5 to 49.6 % (docs/ranking.md); to be chosen by
    cross-validation on training data."""
    recency_weight: float = 0.0
    """Default ranking: the largest share of its key a memory loses to age, ``1 - recency``.
    Off by default, for the same reason as ``stale_weight`` (0.1 was measured with it)."""
    recency_horizon_s: float = 30 * 86_400.0
    """Default ranking: ``recency = exp(-age / recency_horizon_s)`` (chosen: 30 days)."""
    lexical: bool = True
    """Default ranking: fuse a BM25 full-text channel (:mod:`scrubjay.lexical`, kept beside
    Chroma) with the dense relevance, ``r = (1 - lexical_weight) * dense + lexical_weight *
    BM25 / best BM25`` (:mod:`scrubjay.fusion`, docs/hybrid.md). Backends with a mirror only
    (embedded stores, and servers with ``mirror=True``); a server without a mirror ranks by the
    dense relevance alone."""
    lexical_weight: float = LEXICAL_WEIGHT
    """``lambda`` of the fusion (chosen by cross-validation on a training split, docs/hybrid.md)."""

    def __post_init__(self) -> None:
        for name in ("superseded_weight", "stale_weight", "recency_weight"):
            x = getattr(self, name)
            _check(_finite(x) and 0 <= x < 1, "SearchConfig", name, "in [0, 1)", x)
        _check(isinstance(self.lexical, bool), "SearchConfig", "lexical", "a bool", self.lexical)
        _check(_finite(self.lexical_weight) and 0 <= self.lexical_weight <= 1, "SearchConfig",
               "lexical_weight", "in [0, 1]", self.lexical_weight)
        _check(_finite(self.recency_horizon_s) and self.recency_horizon_s > 0, "SearchConfig",
               "recency_horizon_s", "a finite number > 0", self.recency_horizon_s)
        _check(self.ranking in ("relevance", "paper"), "SearchConfig", "ranking",
               "'relevance' or 'paper'", self.ranking)
        _check(isinstance(self.candidates, int) and self.candidates >= 1, "SearchConfig",
               "candidates", "an int >= 1", self.candidates)
        _check(self.scan_max is None or (isinstance(self.scan_max, int) and self.scan_max >= 0),
               "SearchConfig", "scan_max", "None or an int >= 0", self.scan_max)


@dataclass(frozen=True, slots=True, kw_only=True)
class ScrubJayConfig:
    """Every hyperparameter of ScrubJay-MEM, grouped by mechanism (all frozen)."""

    fusion: FusionConfig = field(default_factory=FusionConfig)
    classifier: ClassifierConfig = field(default_factory=ClassifierConfig)
    decay: DecayConfig = field(default_factory=DecayConfig)
    weights: WeightConfig = field(default_factory=WeightConfig)
    graph: GraphConfig = field(default_factory=GraphConfig)
    rci: RCIConfig = field(default_factory=RCIConfig)
    buffer: BufferConfig = field(default_factory=BufferConfig)
    consolidation: ConsolidationConfig = field(default_factory=ConsolidationConfig)
    llm: LLMConfig = field(default_factory=LLMConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    supersession: SupersessionConfig = field(default_factory=SupersessionConfig)

    @classmethod
    def paper(cls) -> ScrubJayConfig:
        """The paper as published: Eq. 5 ranking, the keyword fallback classifier, no
        supersession on add (the paper updates older memories through RCI only) and no
        windows read from the text."""
        return cls(classifier=ClassifierConfig(offline="keyword"),
                   decay=DecayConfig(windows=False),
                   search=SearchConfig(ranking="paper"),
                   supersession=SupersessionConfig(enabled=False))

    def __post_init__(self) -> None:
        expected = {"fusion": FusionConfig, "classifier": ClassifierConfig, "decay": DecayConfig,
                    "weights": WeightConfig, "graph": GraphConfig, "rci": RCIConfig,
                    "buffer": BufferConfig, "consolidation": ConsolidationConfig,
                    "llm": LLMConfig, "search": SearchConfig,
                    "supersession": SupersessionConfig}
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, expected[f.name]):
                raise ConfigError(f"The {f.name!r} parameter of ScrubJayConfig must be a "
                                  f"{expected[f.name].__name__}. Got {type(value).__name__} "
                                  f"instead.")
        _check(self.classifier.tau_min_s <= self.classifier.default_tau_s
               <= self.classifier.tau_max_s, "ScrubJayConfig", "classifier.default_tau_s",
               "inside [tau_min_s, tau_max_s]", self.classifier.default_tau_s)
