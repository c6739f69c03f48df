"""Build notebooks/01_langchain_quickstart.ipynb (committed without outputs)."""

from pathlib import Path

import nbformat as nbf

cells = [
    nbf.v4.new_markdown_cell(
        "# LangChain and LangGraph quickstart\n\n"
        "Drop scrubjay into a RAG chain, watch a stale fact drop out over time, and give a "
        "LangGraph graph a long-term store. Runs offline: a deterministic embedder, a frozen "
        "clock and LangChain's fake chat model stand in for Ollama."),
    nbf.v4.new_code_cell(
        "import tempfile\n"
        "from langchain_core.documents import Document\n"
        "from langchain_core.language_models.fake_chat_models import GenericFakeChatModel\n"
        "from langchain_core.messages import AIMessage\n"
        "from langchain_core.output_parsers import StrOutputParser\n"
        "from langchain_core.prompts import ChatPromptTemplate\n"
        "from langchain_core.runnables import RunnablePassthrough\n"
        "from langchain_scrubjay import ScrubJayRetriever, ScrubJayStore\n"
        "from scrubjay.testing import FrozenClock, HashEmbedder\n\n"
        "clock = FrozenClock(1_764_000_000)\n"
        "folder = tempfile.mkdtemp()"),
    nbf.v4.new_markdown_cell("## 1. A retriever over an existing corpus\n\n"
                             "`created_at` and `context` are read from each document's metadata."),
    nbf.v4.new_code_cell(
        "docs = [\n"
        "    Document(\"Right now I am parked on level 3\", metadata={\"context\": \"at the mall\"}),\n"
        "    Document(\"The user is allergic to shellfish\", metadata={\"context\": \"dinner\"}),\n"
        "    Document(\"The user is a structural engineer\", metadata={\"context\": \"intro\"}),\n"
        "]\n"
        "retriever = ScrubJayRetriever.from_documents(docs, path=f\"{folder}/rag\", namespace=\"alice\",\n"
        "                                             embedder=HashEmbedder(), clock=clock, k=2,\n"
        "                                             include_stale=False)\n"
        "for d in retriever.invoke(\"where am I parked?\"):\n"
        "    m = d.metadata\n"
        "    print(f\"{m['score']:.3f} {m['label']:<10} stale={m['stale']}  {d.page_content}\")"),
    nbf.v4.new_markdown_cell("## 2. Inside an LCEL RAG chain\n\n"
                             "The fake chat model echoes nothing; we print the prompt it received."),
    nbf.v4.new_code_cell(
        "prompt = ChatPromptTemplate.from_template(\"Context:\\n{context}\\n\\nQuestion: {question}\")\n"
        "model = GenericFakeChatModel(messages=iter([AIMessage(\"Level 3.\")] * 1 + [AIMessage(\"I don't know.\")]))\n"
        "context = retriever | (lambda ds: \"\\n\".join(d.page_content for d in ds))\n"
        "chain = {\"context\": context, \"question\": RunnablePassthrough()} | prompt | model | StrOutputParser()\n"
        "print(context.invoke(\"where am I parked?\"))\n"
        "print(\"->\", chain.invoke(\"where am I parked?\"))"),
    nbf.v4.new_markdown_cell("## 3. Two days later the parking spot is stale and drops out"),
    nbf.v4.new_code_cell(
        "clock.advance(days=2)\n"
        "print(context.invoke(\"where am I parked?\"))\n"
        "print(\"->\", chain.invoke(\"where am I parked?\"))\n"
        "for d in retriever.invoke(\"where am I parked?\", include_stale=True, k=3):\n"
        "    print(f\"utility={d.metadata['utility']:.3f} stale={d.metadata['stale']}  {d.page_content}\")\n"
        "assert \"parked\" not in context.invoke(\"where am I parked?\")"),
    nbf.v4.new_markdown_cell("## 4. A LangGraph graph with a ScrubJay long-term store"),
    nbf.v4.new_code_cell(
        "from typing import TypedDict\n"
        "from langgraph.graph import END, START, StateGraph\n"
        "from langgraph.store.base import BaseStore\n\n"
        "store = ScrubJayStore(path=f\"{folder}/graph\", embedder=HashEmbedder(), clock=clock,\n"
        "                      index={\"fields\": [\"text\"]})\n\n"
        "class State(TypedDict):\n"
        "    user: str\n"
        "    message: str\n"
        "    recalled: list\n\n"
        "def remember(state: State, *, store: BaseStore):\n"
        "    key = str(len(store.search((\"users\", state[\"user\"]), limit=100)))\n"
        "    store.put((\"users\", state[\"user\"]), key, {\"text\": state[\"message\"]})\n"
        "    return {}\n\n"
        "def recall(state: State, *, store: BaseStore):\n"
        "    hits = store.search((\"users\", state[\"user\"]), query=state[\"message\"], limit=3)\n"
        "    return {\"recalled\": [(h.value[\"text\"], round(h.score, 3), h.stale) for h in hits]}\n\n"
        "builder = StateGraph(State)\n"
        "builder.add_node(\"remember\", remember)\n"
        "builder.add_node(\"recall\", recall)\n"
        "builder.add_edge(START, \"remember\")\n"
        "builder.add_edge(\"remember\", \"recall\")\n"
        "builder.add_edge(\"recall\", END)\n"
        "graph = builder.compile(store=store)\n"
        "for msg in [\"I am in meeting room 4B right now\", \"My favourite tea is green tea\",\n"
        "            \"Which room am I in right now?\"]:\n"
        "    print(graph.invoke({\"user\": \"alice\", \"message\": msg, \"recalled\": []})[\"recalled\"])\n"
        "print(store.list_namespaces())"),
    nbf.v4.new_code_cell(
        "clock.advance(days=1)\n"
        "print(graph.invoke({\"user\": \"alice\", \"message\": \"Which room am I in?\", \"recalled\": []})[\"recalled\"])\n"
        "store.close()"),
]
nb = nbf.v4.new_notebook(cells=cells, metadata={"kernelspec": {
    "name": "python3", "display_name": "Python 3", "language": "python"}})
out = Path(__file__).parents[1] / "notebooks" / "01_langchain_quickstart.ipynb"
nbf.write(nb, out)
print(out)
