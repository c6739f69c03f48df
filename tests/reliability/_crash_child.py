"""Child process of the crash test: writes to an embedded store until it is SIGKILLed.

Usage: ``python _crash_child.py STORE_DIR ACK_FILE RUN SEED``

Every call that returns is *acknowledged* by appending one JSON line to ACK_FILE and
``fsync``-ing it: ``{"op": "add", "id": ..., "text": ..., "context": ...}`` for each stored
memory (``add``, ``add_many`` and the memory ``integrate`` stores), ``{"op": "delete", "id": ...}``
after a delete returns (preceded by a ``deleting`` intent line, since a delete cut short by the
kill may or may not have happened). A memory is acknowledged once the call that wrote it has returned.
"""

from __future__ import annotations

import json
import os
import random
import sys

from scrubjay import ClassifierConfig, ScrubJayConfig, ScrubJayMemory
from scrubjay.testing import HashEmbedder

TOPICS = ("garden", "taxes", "piano", "cycling", "kitchen", "travel", "books", "health")


def note(mid: str, rng: random.Random) -> tuple[str, str]:
    """A memory whose text names its own id (so the parent can check it is not garbled)."""
    topic = rng.choice(TOPICS)
    return f"note {mid} about {topic} {rng.randrange(10**6)}", rng.choice(["", f"ctx {topic}"])


def main() -> None:
    folder, ack_path, run, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    rng = random.Random(seed)
    ack = open(ack_path, "a", encoding="utf-8")  # noqa: SIM115 - lives until the kill

    def acknowledge(**entry: str) -> None:
        ack.write(json.dumps(entry) + "\n")
        ack.flush()
        os.fsync(ack.fileno())

    cfg = ScrubJayConfig(classifier=ClassifierConfig(offline="keyword"))
    mem = ScrubJayMemory(path=folder, embedder=HashEmbedder(dim=256), config=cfg)
    print("READY", flush=True)
    acked: list[str] = [r.id for r in mem]
    n = 0
    while True:
        n += 1
        roll = rng.random()
        if roll < 0.55:
            mid = f"r{run}n{n}"
            text, ctx = note(mid, rng)
            rec = mem.add(text, context=ctx, metadata={"run": run, "n": n})
            acknowledge(op="add", id=rec.id, text=text, context=ctx)
            acked.append(rec.id)
        elif roll < 0.75:
            items = []
            for j in range(rng.randint(2, 6)):
                mid = f"r{run}n{n}b{j}"
                text, ctx = note(mid, rng)
                items.append({"id": mid, "text": text, "context": ctx,
                              "metadata": {"run": run, "n": n}})
            for rec, item in zip(mem.add_many(items), items, strict=True):
                acknowledge(op="add", id=rec.id, text=item["text"], context=item["context"])
                acked.append(rec.id)
        elif roll < 0.92:
            topic = rng.choice(TOPICS)
            text = f"update r{run}n{n} the {topic} plan changed"
            report = mem.integrate(text, context=f"ctx {topic}")
            assert report.stored is not None
            acknowledge(op="add", id=report.stored.id, text=text, context=f"ctx {topic}")
            acked.append(report.stored.id)
        elif acked:
            mid = acked.pop(rng.randrange(len(acked)))
            acknowledge(op="deleting", id=mid)  # intent: after a kill, present or absent
            mem.delete(mid)
            acknowledge(op="delete", id=mid)


if __name__ == "__main__":
    main()
