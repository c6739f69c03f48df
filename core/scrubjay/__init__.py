"""scrubjay: agent memory that knows how fast each thing it remembers goes stale.

The ScrubJay-MEM system (What-Where-When memory units with per-memory perishability, adaptive
retrieval, an episodic graph, retroactive updates, a prospective buffer and consolidation),
persisted in Chroma. Framework-neutral: importing it loads neither LangChain nor LlamaIndex.

>>> from scrubjay import ScrubJayMemory
>>> mem = ScrubJayMemory(path="./memory", namespace="alice")          # doctest: +SKIP
>>> mem.add("I'm parked on level 3", context="at the mall")            # doctest: +SKIP
"""

from .config import (
    BufferConfig,
    ClassifierConfig,
    ConsolidationConfig,
    DecayConfig,
    FusionConfig,
    GraphConfig,
    KeywordRule,
    LLMConfig,
    RCIConfig,
    RetentionPolicy,
    ScrubJayConfig,
    SearchConfig,
    SupersessionConfig,
    WeightConfig,
)
from .embedding import Embedder
from .errors import (
    ConfigError,
    EmbedderMismatchError,
    EmbeddingError,
    FilterError,
    ForkedStoreError,
    InvalidInputError,
    InvalidNamespaceError,
    LLMError,
    MemoryNotFoundError,
    NamespaceNotFoundError,
    ScrubJayError,
    StoreError,
    StoreLockedError,
    TimeWindowError,
)
from .memory import ScrubJayMemory
from .types import Deltas, Hit, IntegrationReport, MemoryRecord, Perishability

__version__ = "0.1.0"

__all__ = [
    "BufferConfig",
    "ClassifierConfig",
    "ConfigError",
    "ConsolidationConfig",
    "DecayConfig",
    "Deltas",
    "Embedder",
    "EmbedderMismatchError",
    "EmbeddingError",
    "FilterError",
    "ForkedStoreError",
    "FusionConfig",
    "GraphConfig",
    "Hit",
    "IntegrationReport",
    "InvalidInputError",
    "InvalidNamespaceError",
    "KeywordRule",
    "LLMConfig",
    "LLMError",
    "MemoryNotFoundError",
    "MemoryRecord",
    "NamespaceNotFoundError",
    "Perishability",
    "RCIConfig",
    "RetentionPolicy",
    "ScrubJayConfig",
    "ScrubJayError",
    "ScrubJayMemory",
    "SearchConfig",
    "StoreError",
    "StoreLockedError",
    "SupersessionConfig",
    "TimeWindowError",
    "WeightConfig",
    "__version__",
]
