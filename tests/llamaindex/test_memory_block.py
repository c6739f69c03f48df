"""ScrubJayMemoryBlock driven through LlamaIndex's Memory (and a chat engine on top)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

import pytest
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import ChatMessage, MockLLM
from llama_index.core.memory import Memory
from llama_index.core.utils import get_tokenizer
from scrubjay import InvalidInputError, ScrubJayMemory
from scrubjay.testing import FrozenClock, HashEmbedder
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from llamaindex_scrubjay import ScrubJayMemoryBlock

PARKED = "I am parked on level 3 right now"
SISTER = "My sister lives in Oslo"
CHAT = [("user", PARKED), ("assistant", "Got it: level 3."),
        ("user", SISTER), ("assistant", "Oslo is lovely in spring."),
        ("user", "Can you suggest a book for the weekend?"),
        ("assistant", "Try The Left Hand of Darkness.")]


@pytest.fixture
def mem(clock: FrozenClock, embedder: HashEmbedder) -> ScrubJayMemory:
    m = ScrubJayMemory(embedder=embedder, clock=clock)
    yield m
    m.close()


@pytest.fixture
def new_memory() -> Iterator[Callable[..., Memory]]:
    """LlamaIndex Memories whose chat stores are closed when the test ends.

    A small chat-history share makes Memory flush the older turns into the block; each Memory
    gets its own in-memory SQLite chat store (aiosqlite). Left to the garbage collector, such a
    connection can be finalised inside a later test's event loop, and its worker thread then
    fails on that loop once closed (a PytestUnhandledThreadExceptionWarning in an unrelated
    test), so the engines are disposed here.
    """
    engines: list[AsyncEngine] = []

    def make(block: ScrubJayMemoryBlock, token_limit: int = 120) -> Memory:
        engines.append(create_async_engine("sqlite+aiosqlite:///:memory:"))
        return Memory.from_defaults(session_id="s1", memory_blocks=[block],
                                    token_limit=token_limit, chat_history_token_ratio=0.25,
                                    token_flush_size=20, async_engine=engines[-1])
    yield make
    for engine in engines:
        asyncio.run(engine.dispose())


def _get(memory: Memory, use_async: bool, text: str) -> list[ChatMessage]:
    return asyncio.run(memory.aget(input=text)) if use_async else memory.get(input=text)


@pytest.mark.parametrize("use_async", [False, True])
def test_flushed_messages_become_memories_and_go_stale(mem: ScrubJayMemory, clock: FrozenClock,
                                                       use_async: bool, new_memory) -> None:
    memory = new_memory(ScrubJayMemoryBlock(mem))
    for role, text in CHAT:
        if use_async:
            asyncio.run(memory.aput(ChatMessage(role=role, content=text)))
        else:
            memory.put(ChatMessage(role=role, content=text))
    stored = {r.text: r for r in mem}
    assert PARKED in stored and SISTER in stored  # flushed out of the FIFO into the block
    assert stored[PARKED].context == "s1" and stored[PARKED].metadata == {
        "role": "user", "session_id": "s1"}
    assert stored[PARKED].label == "ephemeral"

    out = _get(memory, use_async, "where am I parked, and where does my sister live?")
    assert out[0].role == "system"
    assert "<ScrubJayMemory>" in out[0].content and f"- {PARKED} [ephemeral;" in out[0].content
    clock.advance(days=2)
    later = _get(memory, use_async, "where am I parked, and where does my sister live?")
    assert PARKED not in later[0].content and f"- {SISTER} [factual;" in later[0].content


def test_token_budget_and_truncation(mem: ScrubJayMemory) -> None:
    block = ScrubJayMemoryBlock(mem, similarity_top_k=10, token_budget=80)
    mem.add_many([f"Fact number {i}: the user likes colour {i}" for i in range(10)])
    text = asyncio.run(block.aget([ChatMessage(role="user", content="which colour")]))
    tokens = len(get_tokenizer()(text))
    assert 0 < tokens <= 80 and 2 <= len(text.splitlines()) < 10
    short = asyncio.run(block.atruncate(text, 5))
    assert short is not None and text.startswith(short) and len(short) < len(text)
    assert asyncio.run(block.atruncate(text, 10_000)) is None


def test_memory_truncates_a_prioritised_block(mem: ScrubJayMemory, new_memory) -> None:
    mem.add_many([f"Fact number {i}: the user likes colour {i}" for i in range(10)])
    block = ScrubJayMemoryBlock(mem, similarity_top_k=10, priority=1)
    whole = asyncio.run(block.aget([ChatMessage(role="user", content="which colour")]))
    memory = new_memory(block, token_limit=60)
    out = memory.get(input="which colour")
    shown = [ln for ln in out[0].content.splitlines() if ln.startswith("- ")]
    assert 1 <= len(shown) < len(whole.splitlines())


def test_roles_and_fixed_context(mem: ScrubJayMemory) -> None:
    block = ScrubJayMemoryBlock(mem, context="travel planning", store_roles=["user"])
    asyncio.run(block.aput([ChatMessage(role="system", content="You are helpful"),
                            ChatMessage(role="assistant", content="Sure"),
                            ChatMessage(role="user", content=""),
                            ChatMessage(role="user", content="I fly to Lisbon on Monday")],
                           session_id="s9"))
    (rec,) = list(mem)
    assert rec.text == "I fly to Lisbon on Monday" and rec.context == "travel planning"
    hits = mem.search("Lisbon", context="travel planning", k=1)
    assert hits[0].where == pytest.approx(1.0, abs=1e-5)


def test_accept_short_term_memory_false_ignores_flushes(mem: ScrubJayMemory, new_memory) -> None:
    memory = new_memory(ScrubJayMemoryBlock(mem, accept_short_term_memory=False))
    for role, text in CHAT:
        memory.put(ChatMessage(role=role, content=text))
    assert len(mem) == 0


def test_chat_engine_loop_sees_the_memories(mem: ScrubJayMemory, new_memory) -> None:
    memory = new_memory(ScrubJayMemoryBlock(mem), token_limit=200)
    engine = SimpleChatEngine.from_defaults(llm=MockLLM(), memory=memory)
    for _, text in CHAT[::2]:
        engine.chat(text)
    assert any(r.text == PARKED for r in mem)
    # MockLLM echoes the prompt: the system message carries the remembered parking spot
    reply = str(engine.chat("where am I parked?"))
    assert f"- {PARKED} [" in reply


def test_block_is_pydantic_and_validates(mem: ScrubJayMemory) -> None:
    block = ScrubJayMemoryBlock(mem, name="LongTerm", similarity_top_k=3)
    assert block.memory is mem and block.name == "LongTerm"
    dumped = block.model_dump()
    assert dumped["similarity_top_k"] == 3 and "tokenizer_fn" not in dumped
    with pytest.raises(ValueError):
        ScrubJayMemoryBlock(mem, similarity_top_k=0)
    with pytest.raises(InvalidInputError, match="'memory' parameter of ScrubJayMemoryBlock"):
        ScrubJayMemoryBlock(object())  # type: ignore[arg-type]


def test_from_store(tmp_path, clock: FrozenClock, embedder: HashEmbedder) -> None:
    block = ScrubJayMemoryBlock.from_store(tmp_path / "m", namespace="chat", embed_model=embedder,
                                           memory_kwargs={"clock": clock}, token_budget=64)
    try:
        assert block.token_budget == 64 and block.memory.namespace == "chat"
    finally:
        block.memory.close()


def test_each_memory_is_one_prompt_line(mem: ScrubJayMemory) -> None:
    mem.add("Packing list:\n- passport\n- charger", context="travel")
    mem.add("The user's passport expires in 2031", context="travel")
    text = asyncio.run(ScrubJayMemoryBlock(mem).aget(
        [ChatMessage(role="user", content="passport")]))
    lines = text.splitlines()
    assert len(lines) == 2 and all(ln.startswith("- ") for ln in lines)
    assert "- Packing list: - passport - charger [" in text
