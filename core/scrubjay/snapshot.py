"""A saved copy of an embedded namespace's mirror and graph, for a fast reopen.

Without it, reopening an embedded store reads every row, its vectors and its adjacency back from
Chroma, which takes many times longer for a large store. At a clean close the namespace's mirror (records, what and
where vectors) and graph (every edge once, with its typed weights) are written to
``PATH/scrubjay-<namespace>.snapshot.npz`` with the store's change marker
(:meth:`ChromaStore.change_marker`: the collections' ids, counts and last applied log sequence
numbers). A reopen uses the file only when its marker equals the store's and its checksum holds;
a missing, stale, corrupt or foreign file is ignored and the mirror is rebuilt from Chroma,
which stays the source of truth. The file is deleted whenever a memory is deleted, so a deleted
memory's text does not outlive it on disk.

Format: ``numpy.savez`` (no pickles): strings packed as one UTF-8 buffer and offsets, floats as
float64, vectors as float32 (where-vectors only for rows with a context), edges as row-index
pairs; a CRC32 over every array guards against torn or altered files.
"""

from __future__ import annotations

import json
import logging
import math
import os
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

from .graph import EpisodicGraph
from .types import MemoryRecord, record_from_stored

__all__ = ["Snapshot", "load_snapshot", "remove_snapshot", "save_snapshot", "snapshot_path"]

logger = logging.getLogger(__name__)

#: Bumped whenever the layout below changes; another version is ignored (rebuilt from Chroma).
SNAPSHOT_VERSION = 4
_STRINGS = ("id", "text", "context", "label", "annotation", "source", "metadata",
            "superseded_by", "window", "rci_deltas")
_FLOATS = ("pi", "tau", "value", "t", "updated", "valid_from", "valid_until", "invalidated")
_EDGE_FLOATS = ("weight", "semantic", "contextual", "temporal")


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A namespace's mirror rows and graph as loaded from a snapshot file."""

    records: list[MemoryRecord]
    what: NDArray[np.float32]
    where: NDArray[np.float32]
    wdeg: NDArray[np.float64]
    """Each row's weighted degree, as the mirror held it."""
    graph: EpisodicGraph
    drift: NDArray[np.float64]
    """Each row's bound on the angle between its exact and its indexed what-vector (RCI)."""


def snapshot_path(folder: str | os.PathLike[str], namespace: str) -> Path:
    """Where the snapshot of ``namespace`` lives in an embedded store ``folder``."""
    return Path(folder) / f"scrubjay-{namespace}.snapshot.npz"


def remove_snapshot(path: Path) -> None:
    """Delete a snapshot file if there is one (and a temporary one left by a crash)."""
    for p in (path, _temporary(path)):
        try:
            p.unlink(missing_ok=True)
        except OSError as exc:  # pragma: no cover - a read-only folder
            logger.warning("Could not remove the snapshot %s: %s", p, exc)


def _temporary(path: Path) -> Path:
    return path.with_name(path.name + ".tmp")


def _pack(strings: Sequence[str]) -> tuple[NDArray[np.uint8], NDArray[np.int64]]:
    """Strings as one UTF-8 buffer and the end offset of each."""
    encoded = [s.encode("utf-8", "surrogatepass") for s in strings]
    ends = np.cumsum([len(b) for b in encoded], dtype=np.int64)
    return np.frombuffer(b"".join(encoded), dtype=np.uint8), ends


def _unpack(buf: NDArray[np.uint8], ends: NDArray[np.int64]) -> list[str]:
    raw = buf.tobytes()
    stops = ends.tolist()
    starts = [0, *stops][:-1]
    return [raw[a:b].decode("utf-8", "surrogatepass") for a, b in zip(starts, stops, strict=True)]


def _checksum(arrays: dict[str, NDArray[Any]]) -> int:
    crc = 0
    for name in sorted(arrays):
        crc = zlib.crc32(name.encode(), crc)
        crc = zlib.crc32(np.ascontiguousarray(arrays[name]).view(np.uint8).reshape(-1).data, crc)
    return crc


def save_snapshot(path: Path, marker: str, records: Sequence[MemoryRecord],
                  what: NDArray[np.float32], where: NDArray[np.float32],
                  wdeg: NDArray[np.float64], graph: EpisodicGraph,
                  drift: NDArray[np.float64] | None = None) -> None:
    """Write the snapshot atomically (a temporary file, then a rename)."""
    arrays: dict[str, NDArray[Any]] = {
        "version": np.array([SNAPSHOT_VERSION], dtype=np.int64),
        "marker": np.frombuffer(marker.encode(), dtype=np.uint8),
        "what": np.ascontiguousarray(what, dtype=np.float32),
    }
    columns: dict[str, list[str]] = {
        "id": [r.id for r in records], "text": [r.text for r in records],
        "context": [r.context for r in records], "label": [r.label for r in records],
        "annotation": [r.annotation for r in records], "source": [r.source for r in records],
        "metadata": [json.dumps(dict(r.metadata), separators=(",", ":"), sort_keys=True)
                     if r.metadata else "" for r in records],
        "superseded_by": [r.superseded_by or "" for r in records],
        "window": [r.window or "" for r in records],
        "rci_deltas": [json.dumps(r.rci_deltas, separators=(",", ":")) if r.rci_deltas else ""
                       for r in records],
    }
    for name in _STRINGS:
        arrays[f"s_{name}"], arrays[f"e_{name}"] = _pack(columns[name])
    arrays["f_pi"] = np.array([r.pi for r in records], dtype=np.float64)
    arrays["f_tau"] = np.array([r.tau_s for r in records], dtype=np.float64)
    arrays["f_value"] = np.array([r.value for r in records], dtype=np.float64)
    arrays["f_t"] = np.array([r.created_at_s for r in records], dtype=np.float64)
    for name, field in (("updated", "updated_at_s"), ("valid_from", "valid_from_s"),
                        ("valid_until", "valid_until_s"), ("invalidated", "invalidated_at_s")):
        arrays[f"f_{name}"] = np.array([np.nan if getattr(r, field) is None else getattr(r, field)
                                        for r in records], dtype=np.float64)
    has_where = np.flatnonzero(np.any(where != 0, axis=1))
    arrays["where_rows"] = has_where.astype(np.int64)
    arrays["where"] = np.ascontiguousarray(where[has_where], dtype=np.float32)
    arrays["wdeg"] = np.asarray(wdeg, dtype=np.float64)
    # each row's bound on the angle between its exact and its indexed what-vector (RCI)
    arrays["drift"] = (np.zeros(len(records)) if drift is None
                       else np.asarray(drift, dtype=np.float64))
    arrays.update(_edge_arrays(records, graph))
    arrays["crc"] = np.array([_checksum(arrays)], dtype=np.int64)
    tmp = _temporary(path)
    with open(tmp, "wb") as fh:
        np.savez(fh, **cast(dict[str, Any], arrays))  # (numpy's stub: as if allow_pickle)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _edge_arrays(records: Sequence[MemoryRecord], graph: EpisodicGraph
                 ) -> dict[str, NDArray[Any]]:
    """Every edge between known rows once, as row-index pairs and its four weights."""
    row = {r.id: i for i, r in enumerate(records)}
    pairs: list[tuple[int, int]] = []
    values: list[tuple[float, float, float, float]] = []
    for u, v, d in graph.g.edges(data=True):
        if u in row and v in row:
            pairs.append((row[u], row[v]))
            values.append((d["weight"], d["semantic"], d["contextual"], d["temporal"]))
    uv = np.array(pairs, dtype=np.int64).reshape(-1, 2)
    vals = np.array(values, dtype=np.float64).reshape(-1, 4)
    out: dict[str, NDArray[Any]] = {"edge_u": uv[:, 0].copy(), "edge_v": uv[:, 1].copy()}
    for j, name in enumerate(_EDGE_FLOATS):
        out[f"edge_{name}"] = vals[:, j].copy()
    return out


def load_snapshot(path: Path, marker: str, dim: int | None,
                  graph: EpisodicGraph) -> Snapshot | None:
    """The snapshot at ``path`` if it is whole and was written at ``marker``, else None.

    ``graph`` (empty) receives the edges. Nothing is trusted before the checksum and the
    marker match; any inconsistency is logged and answered with None.
    """
    if not path.exists():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
        if int(arrays["version"][0]) != SNAPSHOT_VERSION:
            logger.info("Ignoring a snapshot of another version: %s", path)
            return None
        crc = int(arrays.pop("crc")[0])
        if _checksum(arrays) != crc:
            logger.warning("Ignoring a corrupt snapshot (checksum): %s", path)
            return None
        if arrays["marker"].tobytes().decode() != marker:
            logger.info("Ignoring a stale snapshot (the store changed since): %s", path)
            return None
        return _decode(arrays, dim, graph)
    except Exception as exc:  # noqa: BLE001 - a torn or foreign file: rebuild from Chroma
        logger.warning("Ignoring an unreadable snapshot %s: %s: %s", path, type(exc).__name__,
                       exc)
        return None


def _decode(arrays: dict[str, NDArray[Any]], dim: int | None, graph: EpisodicGraph) -> Snapshot:
    cols = {name: _unpack(arrays[f"s_{name}"], arrays[f"e_{name}"]) for name in _STRINGS}
    n = len(cols["id"])
    what = arrays["what"]
    if what.ndim != 2 or what.shape[0] != n or (dim is not None and what.shape[1] != dim):
        raise ValueError(f"vectors of shape {what.shape} for {n} rows of dimension {dim}")
    where = np.zeros_like(what)
    where[arrays["where_rows"]] = arrays["where"]
    floats = {name: arrays[f"f_{name}"].tolist() for name in _FLOATS}
    if any(len(cols[name]) != n for name in _STRINGS) or any(
            len(floats[name]) != n for name in _FLOATS) or arrays["wdeg"].shape != (n,) \
            or arrays["drift"].shape != (n,):
        raise ValueError("columns of unequal length")
    def optional(name: str) -> list[float | None]:  # NaN: not set
        return [None if math.isnan(u) else u for u in floats[name]]

    metadata = [json.loads(m) if m else {} for m in cols["metadata"]]
    records = [record_from_stored(values) for values in zip(
        cols["id"], cols["text"], cols["context"], cols["label"], floats["pi"], floats["tau"],
        floats["value"], floats["t"], metadata, cols["annotation"], cols["source"],
        optional("updated"), optional("valid_from"), optional("valid_until"),
        optional("invalidated"), [s or None for s in cols["superseded_by"]],
        [s or None for s in cols["window"]],
        [tuple(tuple(d) for d in json.loads(s)) if s else () for s in cols["rci_deltas"]],
        strict=True)]
    ids = cols["id"]
    graph.add_edges_from_arrays(
        ids, arrays["edge_u"].tolist(), arrays["edge_v"].tolist(),
        *(arrays[f"edge_{name}"].tolist() for name in _EDGE_FLOATS))
    return Snapshot(records=records, what=what, where=where, wdeg=arrays["wdeg"], graph=graph,
                    drift=arrays["drift"])
