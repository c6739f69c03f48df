"""Build notebooks/02_llamaindex_quickstart.ipynb (committed without outputs; CI executes it).

Run: python scripts/build_llamaindex_notebook.py
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

OUT = Path(__file__).resolve().parents[1] / "notebooks" / "02_llamaindex_quickstart.ipynb"

CELLS = [
    new_markdown_cell("""# scrubjay with LlamaIndex: a quickstart

`llamaindex_scrubjay` makes a `ScrubJayMemory` usable wherever LlamaIndex takes a **retriever** or
a **memory**:

- `ScrubJayRetriever`: a `BaseRetriever` for `RetrieverQueryEngine` and friends;
- `ScrubJayMemoryBlock`: a long-term memory block for `llama_index.core.memory.Memory`;
- `as_scrubjay_embedder`: any LlamaIndex `BaseEmbedding` as the memory's embedder.

Everything here runs offline: an in-memory Chroma, the bundled `wordllama` embedder, LlamaIndex's
`MockLLM` (it answers by echoing its prompt, so we can see which memories the engine was given)
and a `FrozenClock` that we move by hand to watch facts go stale."""),
    new_code_cell("""from llama_index.core import Document
from llama_index.core.llms import ChatMessage, MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine

from llamaindex_scrubjay import ScrubJayMemoryBlock, ScrubJayRetriever
from scrubjay import ScrubJayMemory
from scrubjay.testing import FrozenClock

HOUR, DAY = 3600.0, 86_400.0
clock = FrozenClock(1_764_000_000)  # 2025-11-24 16:00 UTC, a fixed "now"
"""),
    new_markdown_cell("""## 1. Documents in, memories out

Each `Document` becomes one memory. `metadata["context"]` says where it was learnt and
`metadata["created_at"]` when (epoch seconds or an ISO time with a timezone); the rest stays as
the memory's metadata. The document id becomes the memory id, so inserting it again replaces it."""),
    new_code_cell("""now = clock()
docs = [
    Document(text="The user is sitting in meeting room 4B right now", id_="room",
             metadata={"context": "morning design review", "created_at": now - 120}),
    Document(text="The user's task today is to finish the bridge load calculation", id_="task",
             metadata={"context": "planning the work day", "created_at": now - 2 * HOUR}),
    Document(text="The user works in the structural engineering office in Porto", id_="office",
             metadata={"context": "getting to know the user", "created_at": now - 30 * DAY}),
    Document(text="The user is allergic to shellfish", id_="allergy",
             metadata={"context": "booking a team dinner", "created_at": "2025-11-01T12:00:00Z",
                       "source": "onboarding form"}),
]
memory = ScrubJayMemory(clock=clock)  # in-memory Chroma, bundled offline embedder
retriever = ScrubJayRetriever.from_documents(docs, memory=memory, similarity_top_k=2)
len(memory)
"""),
    new_markdown_cell("""Every retrieved `NodeWithScore` carries the memory's perishability (`label`, `pi`, `tau_s`),
its utility now, a `stale` flag and the score's components, all as plain Python numbers."""),
    new_code_cell("""def show(nodes):
    for n in nodes:
        m = n.node.metadata
        print(f"{n.score:5.2f}  {m['label']:<13} tau={m['tau_s'] / HOUR:7.1f} h  "
              f"utility={m['utility']:.2f}  stale={m['stale']!s:<5}  {n.node.text}")

show(retriever.retrieve("Which room is the user sitting in?"))
"""),
    new_markdown_cell("""## 2. A query engine whose answers change as facts go stale

`MockLLM` echoes the prompt, so the "answer" shows the context the engine was given."""),
    new_code_cell("""engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
question = "Which room is the user sitting in?"
answer_now = str(engine.query(question))
print(answer_now)
assert "meeting room 4B" in answer_now
"""),
    new_markdown_cell("""Two days later the meeting is long over. The ephemeral fact's utility has decayed, so it
ranks low and is flagged stale, while the office (a stable fact) now comes first."""),
    new_code_cell("""clock.advance(days=2)
show(retriever.retrieve(question))
retriever.exclude_stale = True  # or keep stale hits and let the prompt show `stale: True`
answer_later = str(engine.query(question))
print(answer_later)
assert "meeting room 4B" not in answer_later and "Porto" in answer_later
"""),
    new_markdown_cell("""## 3. The memory block in a chat loop

`ScrubJayMemoryBlock` plugs into LlamaIndex's `Memory`. Recent turns stay in the chat history;
older turns are flushed into the block and become memories (the session id is their context;
`store_roles` picks whose messages are kept).
On every turn the block returns the relevant memories that are **not stale**, one line each,
within its token budget, and `Memory` puts them into the system message."""),
    new_code_cell("""from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.memory import Memory

chat_memory = ScrubJayMemory(clock=clock, namespace="chat")
# store what the user says (MockLLM's echoed replies are not worth remembering)
block = ScrubJayMemoryBlock(chat_memory, similarity_top_k=3, token_budget=200,
                            store_roles=["user"])
short_term = Memory.from_defaults(session_id="trip-planning", memory_blocks=[block],
                                  token_limit=200, chat_history_token_ratio=0.25,
                                  token_flush_size=20)
chat = SimpleChatEngine.from_defaults(llm=MockLLM(), memory=short_term)

for turn in ["My car is parked on level 3 of the airport garage right now",
             "My sister lives in Oslo and I visit her every winter",
             "Can you suggest a book for the flight?"]:
    chat.chat(turn)

for rec in chat_memory:
    print(f"{rec.label:<13} tau={rec.tau_s / HOUR:7.1f} h  [{rec.context}] {rec.text}")
"""),
    new_code_cell("""def system_prompt(question):
    return short_term.get(input=question)[0].content

print(system_prompt("Where did I park, and when do I visit my sister?"))
assert "level 3" in system_prompt("Where did I park, and when do I visit my sister?")
"""),
    new_markdown_cell("""A week later the parking spot is stale and leaves the prompt; the sister's city stays."""),
    new_code_cell("""clock.advance(days=7)
later = system_prompt("Where did I park, and when do I visit my sister?")
print(later)
assert "level 3" not in later and "Oslo" in later
"""),
    new_markdown_cell("""## 4. Any LlamaIndex embedding

`as_scrubjay_embedder` wraps a LlamaIndex `BaseEmbedding` (here the `MockEmbedding`; in practice
e.g. `OllamaEmbedding`) as the memory's embedder. `from_store` and `from_documents` accept one
as `embed_model=` directly."""),
    new_code_cell("""from llama_index.core.embeddings import MockEmbedding

from llamaindex_scrubjay import as_scrubjay_embedder

embedder = as_scrubjay_embedder(MockEmbedding(embed_dim=32))
with ScrubJayMemory(embedder=embedder, clock=clock, namespace="mock") as m:
    m.add("Embedded with a LlamaIndex model")
    print(m.embedder.name, m.search("model", k=1)[0].text)
"""),
    new_code_cell("""memory.close()
chat_memory.close()
"""),
]


def build() -> nbformat.NotebookNode:
    nb = new_notebook(cells=CELLS)
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python",
                                 "name": "python3"}
    return nb


if __name__ == "__main__":
    nbformat.write(build(), OUT)
