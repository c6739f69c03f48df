"""Fixtures for the LlamaIndex tests: one operation called the sync or the async way."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

Runner = Callable[[Callable[[], Any], Callable[[], Awaitable[Any]]], Any]


def _sync(sync: Callable[[], Any], async_: Callable[[], Awaitable[Any]]) -> Any:
    return sync()


def _async(sync: Callable[[], Any], async_: Callable[[], Awaitable[Any]]) -> Any:
    return asyncio.run(async_())


@pytest.fixture(params=["sync", "async"])
def run(request: pytest.FixtureRequest) -> Runner:
    """``run(lambda: x.retrieve(q), lambda: x.aretrieve(q))`` runs one of the two."""
    return _sync if request.param == "sync" else _async
