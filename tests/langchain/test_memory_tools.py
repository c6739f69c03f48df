"""Classic-chain BaseMemory adapter and the remember / recall / revise agent tools."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from scrubjay import ScrubJayMemory

from langchain_scrubjay import ScrubJayChatMemory, create_memory_tools


def test_chat_memory_saves_exchanges_and_drops_stale(clock, embedder) -> None:
    from langchain_classic.base_memory import BaseMemory

    mem = ScrubJayMemory(embedder=embedder, clock=clock)
    chat = ScrubJayChatMemory(memory=mem, conversation="chat with alice", k=4)
    assert isinstance(chat, BaseMemory) and chat.memory_variables == ["history"]
    chat.save_context({"input": "Right now I am parked on level 3"}, {"output": "Noted."})
    chat.save_context({"input": "My sister lives in Oslo"}, {"output": "Nice."})
    assert {r.context for r in mem} == {"chat with alice"} and len(mem) == 4
    history = chat.load_memory_variables({"input": "where am I parked"})["history"]
    assert "Human: Right now I am parked on level 3" in history and "AI: Noted." in history
    clock.advance(days=2)
    history = chat.load_memory_variables({"input": "where am I parked"})["history"]
    assert "parked on level 3" not in history and "Human: My sister lives in Oslo" in history
    chat.clear()
    assert len(mem) == 0


def test_tools_remember_recall_revise(clock, embedder) -> None:
    mem = ScrubJayMemory(embedder=embedder, clock=clock)
    remember, recall, revise = create_memory_tools(mem, context="chat")
    assert [t.name for t in (remember, recall, revise)] == ["remember", "recall", "revise"]
    assert set(remember.args) == {"text", "context"} and set(recall.args) == {"query", "k"}
    out = remember.invoke({"text": "The user likes green tea", "context": "kitchen"})
    rec = next(iter(mem))
    assert rec.id in out and rec.context == "kitchen"
    assert "green tea" in recall.invoke({"query": "which tea", "k": 1})
    before = mem.get(rec.id).value
    msg = revise.invoke({"new_information": "The user no longer likes green tea"})
    assert "Revised 1 memories" in msg and mem.get(rec.id).value < before   # RCI ran
    assert len(mem) == 2 and mem.get(rec.id).updated_at_s == clock()


class _UpdateFailsOnce:
    """A Chroma collection whose second ``update`` call raises (a transient failure)."""

    def __init__(self, col: Any) -> None:
        self._col, self.calls = col, 0

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._col, name)
        if name != "update":
            return real

        def update(**kwargs: Any) -> Any:
            self.calls += 1
            if self.calls == 2:
                raise RuntimeError("disk full")
            return real(**kwargs)
        return update


def test_a_revise_that_raised_and_is_retried_is_the_same_rci_event(
        clock, embedder, monkeypatch) -> None:
    """An agent retries a tool call that raised with the same words, later. The RCI update
    failed part-way (written in calls of 2 rows here): the retry takes the first call's time,
    so it is the same event, the memories updated before the failure are not updated twice,
    and the store ends as one clean run leaves it."""
    import scrubjay.store as store_module
    from scrubjay import ScrubJayError

    monkeypatch.setattr(store_module, "_UPDATE_BATCH", 2)
    monkeypatch.setattr(store_module, "_WRITE_BATCH", 2)
    items = [{"id": f"m{i}", "text": f"The user's sister lives in Oslo, note {i}"}
             for i in range(6)]
    news = {"new_information": "The user's sister no longer lives in Oslo"}
    control = ScrubJayMemory(embedder=embedder, clock=clock)
    control.add_many(items)
    control_revise = create_memory_tools(control, context="chat")[2]
    assert "Revised 6 memories" in control_revise.invoke(news)
    expected = {r.id: r for r in control}

    mem = ScrubJayMemory(embedder=embedder, clock=clock)
    mem.add_many(items)
    revise = create_memory_tools(mem, context="chat")[2]
    real = mem._store.what
    mem._store.what = failing = _UpdateFailsOnce(real)
    with pytest.raises(ScrubJayError):
        revise.invoke(news)
    assert failing.calls == 2, "one update call landed before the failure"
    mem._store.what = real
    clock.advance(minutes=3)
    assert "stored the new information" in revise.invoke(news)
    assert {r.id: r for r in mem} == expected
    control.close()
    mem.close()


class _ToolCallingFake(GenericFakeChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved")
def test_tools_in_a_langgraph_agent(clock, embedder) -> None:
    from langgraph.prebuilt import create_react_agent

    mem = ScrubJayMemory(embedder=embedder, clock=clock)
    model = _ToolCallingFake(messages=iter([
        AIMessage("", tool_calls=[{"name": "remember", "id": "1",
                                   "args": {"text": "The user is allergic to shellfish"}}]),
        AIMessage("", tool_calls=[{"name": "recall", "id": "2",
                                   "args": {"query": "allergic"}}]),
        AIMessage("You are allergic to shellfish."),
    ]))
    agent = create_react_agent(model, create_memory_tools(mem))
    out = agent.invoke({"messages": [("user", "Remember my allergy, then tell me it.")]})
    tool_msgs = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert len(tool_msgs) == 2 and "allergic to shellfish" in tool_msgs[1].content
    assert [r.text for r in mem] == ["The user is allergic to shellfish"]
    assert out["messages"][-1].content == "You are allergic to shellfish."
