"""The exception tree of scrubjay.

Every exception the package raises on purpose derives from :class:`ScrubJayError`, and each one
also inherits the builtin a caller would naturally catch::

    ScrubJayError(Exception)
    ├── ConfigError(ValueError)              a configuration value is out of its documented range
    │   └── EmbedderMismatchError            a store was written with another embedder
    ├── InvalidInputError(ValueError, TypeError)  bad argument to the public API
    │   └── InvalidNamespaceError            a namespace that cannot name a collection safely
    ├── FilterError(ValueError)              a metadata filter outside the supported grammar
    ├── MemoryNotFoundError(KeyError)        no memory with that id in this namespace
    ├── TimeWindowError(ValueError)          a validity window that ends before it starts
    ├── NamespaceNotFoundError(LookupError)  no store at that path, or no such namespace in it
    ├── EmbeddingError(RuntimeError)         the embedder failed or returned unusable vectors
    ├── LLMError(RuntimeError)               a chat model failed, hung or answered off-format
    │                                        (caught internally: the offline fallback is used)
    └── StoreError(RuntimeError)             the Chroma backend failed
        └── StoreLockedError                 another process holds the embedded store
            └── ForkedStoreError             a fork child opens a store its parent had opened

Messages follow one template, after scikit-learn: "The 'x' parameter of Y must be ... Got ...
instead."
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "EmbedderMismatchError",
    "EmbeddingError",
    "FilterError",
    "ForkedStoreError",
    "InvalidInputError",
    "InvalidNamespaceError",
    "LLMError",
    "MemoryNotFoundError",
    "NamespaceNotFoundError",
    "ScrubJayError",
    "StoreError",
    "StoreLockedError",
    "TimeWindowError",
]


class ScrubJayError(Exception):
    """Root of every exception raised by scrubjay on purpose."""


class ConfigError(ScrubJayError, ValueError):
    """A configuration value is outside its documented range."""


class EmbedderMismatchError(ConfigError):
    """The store was written with an embedder of another name or dimension."""


class InvalidInputError(ScrubJayError, ValueError, TypeError):
    """An argument of the public API has the wrong type or value."""


class InvalidNamespaceError(InvalidInputError):
    """A namespace name that cannot be mapped safely onto Chroma collections."""


class FilterError(ScrubJayError, ValueError):
    """A metadata filter uses an operator or an operand outside :mod:`scrubjay.filters`'s
    grammar; the message names it."""


class MemoryNotFoundError(ScrubJayError, KeyError):
    """No memory with the given id exists in this namespace."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the sentence readable
        return str(self.args[0]) if self.args else "memory not found"


class TimeWindowError(ScrubJayError, ValueError):
    """A validity window whose ``valid_until`` lies before its ``valid_from``, or is not finite."""
class NamespaceNotFoundError(ScrubJayError, LookupError):
    """A store opened for reading (``create=False``) has no folder, or no such namespace."""


class EmbeddingError(ScrubJayError, RuntimeError):
    """The embedder raised, or returned vectors of the wrong shape or with NaN/inf values."""


class LLMError(ScrubJayError, RuntimeError):
    """A chat model raised, timed out or answered in a form that could not be parsed."""


class StoreError(ScrubJayError, RuntimeError):
    """The Chroma backend failed; the original exception is chained as ``__cause__``."""


class StoreLockedError(StoreError):
    """Another process holds the embedded (``PersistentClient``) store at this path."""


class ForkedStoreError(StoreLockedError):
    """This process was made by ``fork`` from one that had opened this embedded store.

    Chroma's state for the folder does not survive a fork (its threads and connection pool stay
    behind in the parent), so such a child cannot open the folder safely; it gets this error at
    once instead of a wait inside Chroma. Open the store in a ``spawn`` or ``forkserver`` child.
    """
