"""A Chroma server SIGKILLed while a client writes to it, then restarted on its folder.

A writer thread keeps storing batches (``add_many`` with its own ids, ``integrate`` at a fixed
time) through ``chromadb.HttpClient``; the test kills the ``chroma run`` process at random
moments, leaves it down, then restarts it on the same folder and port. A call that raises is
retried as it was (same ids, same ``at``) until it returns: that is what a client does.

Checked: every exception the client saw is a :class:`~scrubjay.ScrubJayError` (the package's
own, ``StoreError`` for a server that is down); after the last restart a fresh client reads
every acknowledged memory with its exact text, no memory it did not write, and no text twice.

``SCRUBJAY_SERVER_KILLS`` (default 4) and ``SCRUBJAY_SERVER_KILL_SEED`` (default 11) scale it.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from scrubjay import ClassifierConfig, ScrubJayConfig, ScrubJayError, ScrubJayMemory
from scrubjay.testing import HashEmbedder, _chroma_executable

KILLS = int(os.environ.get("SCRUBJAY_SERVER_KILLS", "4"))
SEED = int(os.environ.get("SCRUBJAY_SERVER_KILL_SEED", "11"))
CFG = ScrubJayConfig(classifier=ClassifierConfig(offline="keyword"))
T0 = 1_764_000_000.0


class Server:
    """``chroma run`` on a fixed folder and port, that can be killed and started again."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        import chromadb

        log = open(self.folder.parent / f"server-{self.starts}.log", "wb")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [_chroma_executable(), "run", "--path", str(self.folder), "--host", "127.0.0.1",
             "--port", str(self.port)], stdout=log, stderr=subprocess.STDOUT,
            env={**os.environ, "ANONYMIZED_TELEMETRY": "False"})
        log.close()
        self.starts += 1
        deadline = time.monotonic() + 60
        while True:
            try:
                chromadb.HttpClient(host="127.0.0.1", port=self.port).heartbeat()
                return
            except Exception:  # noqa: BLE001 - still starting
                assert self.proc.poll() is None, "chroma run exited"
                assert time.monotonic() < deadline, "chroma run did not start"
                time.sleep(0.1)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@contextlib.contextmanager
def _server(folder: Path) -> Iterator[Server]:
    server = Server(folder)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def _memory(port: int, namespace: str) -> ScrubJayMemory:
    import chromadb

    return ScrubJayMemory(client=chromadb.HttpClient(host="127.0.0.1", port=port),
                          namespace=namespace, embedder=HashEmbedder(dim=64), config=CFG)


class Writer(threading.Thread):
    """Stores batches until told to stop; retries a call that raised until it returns."""

    def __init__(self, mem: ScrubJayMemory, rng: random.Random) -> None:
        super().__init__(daemon=True)
        self.mem, self.rng = mem, rng
        self.stop = threading.Event()
        self.acked: dict[str, str] = {}  # id -> text, once the call that wrote it returned
        self.errors: list[BaseException] = []
        self.retries = 0
        self.calls = 0
        self.failure: BaseException | None = None

    def _until_done(self, call: Callable[[], Any]) -> Any:
        deadline = time.monotonic() + 120
        while True:
            try:
                return call()
            except Exception as exc:
                self.errors.append(exc)
                if not isinstance(exc, ScrubJayError) or time.monotonic() > deadline:
                    raise
                self.retries += 1
                time.sleep(0.05)

    def run(self) -> None:
        n = 0
        try:
            while not self.stop.is_set():
                n += 1
                self.calls += 1
                if self.rng.random() < 0.8:
                    items = [{"id": f"b{n}i{j}", "text": f"note {n}.{j} about topic {n % 7}",
                              "at": T0 + n} for j in range(self.rng.randint(1, 5))]
                    recs = self._until_done(lambda items=items: self.mem.add_many(items))
                    for rec, item in zip(recs, items, strict=True):
                        assert rec.id == item["id"]
                        self.acked[rec.id] = item["text"]
                else:
                    text = f"news {n}: topic {n % 7} changed"
                    report = self._until_done(
                        lambda text=text, n=n: self.mem.integrate(text, at=T0 + n))
                    assert report.stored is not None
                    self.acked[report.stored.id] = text
        except BaseException as exc:  # noqa: BLE001 - re-raised by the test
            self.failure = exc


def test_a_server_killed_mid_write_keeps_every_acknowledged_write(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    with _server(tmp_path / "data") as server:
        mem = _memory(server.port, "killed")
        writer = Writer(mem, random.Random(SEED + 1))
        writer.start()
        try:
            for _ in range(KILLS):
                time.sleep(rng.uniform(0.3, 1.5))
                server.kill()
                time.sleep(rng.uniform(0.2, 1.0))  # the client writes to a dead server
                server.start()
            time.sleep(1.0)
        finally:
            writer.stop.set()
            writer.join(180)
        assert not writer.is_alive()
        if writer.failure is not None:
            raise writer.failure
        mem.close()
        foreign = [e for e in writer.errors if not isinstance(e, ScrubJayError)]
        assert not foreign, [f"{type(e).__name__}: {e}" for e in foreign[:3]]

        fresh = _memory(server.port, "killed")
        try:
            stored = {r.id: r.text for r in fresh}
            assert len(fresh) == len(stored)
        finally:
            fresh.close()
    missing = sorted(set(writer.acked) - set(stored))
    assert not missing, missing[:5]
    assert {m: stored[m] for m in writer.acked} == writer.acked
    extra = sorted(set(stored) - set(writer.acked))
    assert not extra, extra[:5]  # every call was retried until it returned
    twice = [t for t, c in Counter(stored.values()).items() if c > 1]
    assert not twice, twice[:5]
    kinds = Counter(type(e).__name__ for e in writer.errors)
    print(f"\nRELIABILITY server kill: kills={KILLS} seed={SEED} calls={writer.calls} "
          f"acknowledged={len(writer.acked)} errors={dict(kinds)} retries={writer.retries} "
          f"missing=0 extra=0 duplicated=0")
