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
    assert set(revise.args) == {"memory_id", "new_information"}
    out = remember.invoke({"text": "The user likes green tea", "context": "kitchen"})
    rec = next(iter(mem))
    assert rec.id in out and rec.context == "kitchen"
    found = recall.invoke({"query": "which tea", "k": 1})
    assert "green tea" in found and f"id {rec.id}" in found
    clock.advance(minutes=5)
    msg = revise.invoke({"memory_id": rec.id, "new_information": "The user now prefers coffee"})
    assert f"Revised {rec.id}" in msg and "green tea" in msg
    now = mem.get(rec.id)
    assert now.text == "The user now prefers coffee" and now.context == "kitchen"
    assert now.created_at_s == clock() and len(mem) == 1
    assert "No memory with id 'nope'" in revise.invoke({"memory_id": "nope",
                                                        "new_information": "x"})


def test_revise_changes_only_the_memory_it_names(clock, embedder) -> None:
    """RCI (``integrate``) updates every memory whose text is close to the news: "The user's
    sister moved to Bergen" lowered "The user's sister is a doctor". The tool changes only the
    memory the agent names."""
    mem = ScrubJayMemory(embedder=embedder, clock=clock)
    mem.add_many([{"id": "oslo", "text": "The user's sister lives in Oslo", "context": "chat",
                   "metadata": {"topic": "family"}},
                  {"id": "doctor", "text": "The user's sister is a doctor", "context": "chat"},
                  {"id": "tea", "text": "The user likes green tea", "context": "chat"}])
    others = {r.id: r for r in mem if r.id != "oslo"}
    revise = create_memory_tools(mem, context="chat")[2]
    revise.invoke({"memory_id": "oslo", "new_information": "The user's sister lives in Bergen"})
    assert {r.id: r for r in mem if r.id != "oslo"} == others
    oslo = mem.get("oslo")
    assert oslo.text == "The user's sister lives in Bergen"
    assert oslo.metadata == {"topic": "family"} and oslo.context == "chat" and len(mem) == 3


def test_recall_ranks_content_above_context(clock, embedder) -> None:
    mem = ScrubJayMemory(embedder=embedder, clock=clock)
    mem.add("The user likes green tea", context="kitchen")
    mem.add("The meeting moved to Friday", context="chat")
    mem.add("The user's sister lives in Oslo", context="chat")
    recall = create_memory_tools(mem, context="chat")[1]
    lines = recall.invoke({"query": "which tea does the user like"}).splitlines()
    assert lines[0].startswith("- The user likes green tea")


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
