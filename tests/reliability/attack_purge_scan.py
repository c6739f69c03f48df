"""Add N memories, delete one, purge, reopen and search; print the deleted id's rows left in
Chroma's log and the files holding its text, context or id (docs/RELIABILITY.md, section 5).

    PYTHONPATH=core:. python tests/reliability/attack_purge_scan.py 40 1200
"""

from __future__ import annotations

import sqlite3
import sys
import tempfile
from pathlib import Path

from scrubjay import ScrubJayMemory
from scrubjay.testing import HashEmbedder


def scan(n: int) -> None:
    folder = Path(tempfile.mkdtemp())
    mem = ScrubJayMemory(path=folder, embedder=HashEmbedder())
    mem.add_many([{"text": f"filler {i} garden"} for i in range(n)])
    secret = mem.add("secret passport XQZ-4471", context="travel QQctx")
    mem.delete(secret.id)
    mem.purge()
    mem.close()
    mem = ScrubJayMemory(path=folder, embedder=HashEmbedder())
    whole = len(mem) == n and secret.id not in mem
    mem.search("passport", k=3)
    mem.close()
    con = sqlite3.connect(folder / "chroma.sqlite3")
    rows = con.execute("SELECT operation, vector IS NULL FROM embeddings_queue WHERE id = ?",
                       [secret.id]).fetchall()
    con.close()
    files = {needle: [f.name for f in folder.rglob("*")
                      if f.is_file() and needle.encode() in f.read_bytes()]
             for needle in ("XQZ-4471", "QQctx", secret.id)}
    print(f"n={n} reopened_whole={whole} log_rows_of_id(operation, no_vector)={rows} "
          f"files_with={files}")


if __name__ == "__main__":
    for arg in sys.argv[1:] or ["40"]:
        scan(int(arg))
