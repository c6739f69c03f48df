"""The chat-model parts of the benchmarks, with fake chat models (no network, no real LLM):
B1/B6/B7, the LLM judge, TGT naturalisation, the CLI options and a tiny end-to-end TGT run."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from scrubjay.bench import run_tgt as rt
from scrubjay.bench import tgt_scoring as ts
from scrubjay.bench.llm_judge import LLMJudge
from scrubjay.bench.llm_systems import (
    B7_PROMPT,
    LLMOnlySystem,
    RAGSystem,
    RAGTemporalSystem,
    format_age,
)
from scrubjay.bench.systems import LLM_SYSTEM_NAMES, SYSTEM_NAMES, MemoryItem, make_system
from scrubjay.bench.tgt import TGTConfig, generate, strip_checkpoint, system_view
from scrubjay.bench.tgt_naturalise import Naturaliser, leaks_answer
from scrubjay.testing import HashEmbedder

DAY = 86_400.0


class PromptModel(BaseChatModel):
    """A LangChain chat model answering ``reply(prompt)``; records every prompt."""

    reply: Callable[[str], str]
    prompts: list[str]

    @property
    def _llm_type(self) -> str:
        return "prompt-fake"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        prompt = "\n".join(str(m.content) for m in messages)
        self.prompts.append(prompt)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(
            content=self.reply(prompt)))])


def _model(reply: Callable[[str], str]) -> PromptModel:
    return PromptModel(reply=reply, prompts=[])


MEMS = [MemoryItem("m1", "Leo's home city is Osaka.", "chat", 0.0),
        MemoryItem("m2", "Leo's current mood is frazzled.", "chat", 1.0 * DAY),
        MemoryItem("m3", "Ana's favourite editor is Zed.", "workspace", 2.0 * DAY)]


# ------------------------------------------------------------------------- systems
def test_llm_systems_need_a_model_and_stay_out_of_the_default_lists() -> None:
    assert set(LLM_SYSTEM_NAMES) == {"B1-llm-only", "B6-rag", "B7-rag-temporal"}
    assert not set(LLM_SYSTEM_NAMES) & set(SYSTEM_NAMES)
    assert not set(LLM_SYSTEM_NAMES) & set(rt.DEFAULT_TGT_SYSTEMS)
    assert set(LLM_SYSTEM_NAMES) <= set(rt.DEFAULT_TGT_LLM_SYSTEMS)
    with pytest.raises(ValueError, match="needs a chat model"):
        make_system("B6-rag", HashEmbedder(dim=16))
    sys_ = make_system("B7-rag-temporal", HashEmbedder(dim=16), llm=lambda p: "x")
    assert isinstance(sys_, RAGTemporalSystem)


def test_b1_answers_without_memory_and_judges_from_its_reply() -> None:
    llm = FakeListChatModel(responses=["Leo lives in Osaka, but that may be outdated.",
                                       "Leo lives in Osaka."])
    b1 = LLMOnlySystem(llm)
    b1.index(MEMS)
    a = b1.answer("Where does Leo live?", 10 * DAY)
    assert a[0].text == "Leo lives in Osaka, but that may be outdated." and not a[0].judged_valid
    a = b1.answer("Where does Leo live?", 10 * DAY)
    assert a[0].text == "Leo lives in Osaka." and a[0].judged_valid
    # No memory reaches the model.
    assert all("Osaka" not in p and "Where does Leo live?" in p for p in b1.prompts)


def test_b6_prompt_holds_the_retrieved_texts_and_the_reply_is_the_answer() -> None:
    llm = _model(lambda p: "Osaka. It is outdated." if "Leo" in p else "?")
    b6 = RAGSystem(HashEmbedder(dim=32), llm)
    b6.index(MEMS)
    a = b6.answer("What is Leo's home city?", 3 * DAY, k=2)
    prompt = llm.prompts[-1]
    for m in MEMS:  # RAG_K = 5 > 3 memories: all retrieved
        assert m.text in prompt
    assert "What is Leo's home city?" in prompt
    assert "recorded" not in prompt and "stale" not in prompt  # no ages, no stale instruction
    assert a[0].text == "Osaka. It is outdated." and a[0].judged_valid is False
    assert a[0].id in {m.id for m in MEMS} and len(a) == 2 and a[1].text in [m.text for m in MEMS]


def test_b7_prompt_holds_ages_and_the_stale_instruction() -> None:
    llm = _model(lambda p: "Zed.")
    b7 = RAGTemporalSystem(HashEmbedder(dim=32), llm)
    b7.index(MEMS)
    a = b7.answer("Which editor does Ana prefer?", 4 * DAY)
    prompt = llm.prompts[-1]
    assert f"[{format_age(4 * DAY)}] {MEMS[0].text}" in prompt
    assert "[recorded 4.0 sessions ago (96 hours, 4.0 days)] Leo's home city" in prompt
    assert "[recorded 2.0 sessions ago (48 hours, 2.0 days)] Ana's" in prompt
    assert '"stale" or "outdated"' in prompt and prompt.startswith(B7_PROMPT.split("{")[0])
    assert a[0].text == "Zed." and a[0].judged_valid is True


def test_failed_calls_answer_empty_and_are_counted() -> None:
    def boom(prompt: str) -> str:
        raise ConnectionError("no server")

    b6 = RAGSystem(HashEmbedder(dim=16), boom)
    b6.index(MEMS)
    a = b6.answer("What is Leo's home city?", DAY)
    assert a[0].text == "" and b6.llm_failures == 1


def test_llm_answers_flow_into_the_scoring() -> None:
    inst = generate(TGTConfig(n_instances=1, seed=2))[0]
    value = {q.text: q.answer_value for q in inst.queries}
    b1 = LLMOnlySystem(lambda p: value[re.search(r"Question: (.*)\n", p).group(1)])
    rows = rt.answer_instance(b1, system_view(inst))
    by_id = {q.query_id: q for q in inst.queries}
    rep = ts.score(ts.QueryResult(query=by_id[qid], answer_text=t, judged_valid=v)
                   for qid, t, v in rows)
    assert rep.factual == 1.0 and rep.combined == pytest.approx(42 / 66)


# --------------------------------------------------------------------------- judge
def _result() -> ts.QueryResult:
    q = generate(TGTConfig(n_instances=1, seed=0))[0].queries[0]
    return ts.QueryResult(query=q, answer_text="I am not sure.", judged_valid=True)


def test_llm_judge_valid_reply_overrides_the_heuristic() -> None:
    judge = LLMJudge(FakeListChatModel(
        responses=['{"contains_value": true, "judges_valid": false}']))
    r = _result()
    assert not ts.factual_correct(r.answer_text, r.query.answer_value)
    text = judge.judge(r, text_judged=True)
    flag = judge.judge(r, text_judged=False)  # cached verdict, one call
    assert text.factual is True and text.judged_valid is False
    assert flag.factual is True and flag.judged_valid is True  # a flag is not overridden
    assert judge.calls == 1 and judge.fallbacks == 0
    assert ts.score([text]).factual == 1.0


@pytest.mark.parametrize("reply", ["Yes, it contains the value.",
                                   '{"contains_value": "yes", "judges_valid": true}',
                                   '{"contains_value": true}'])
def test_llm_judge_malformed_reply_falls_back_and_is_counted(reply: str) -> None:
    judge = LLMJudge(FakeListChatModel(responses=[reply]))
    r = _result()
    out = judge.judge(r, text_judged=True)
    assert judge.fallbacks == 1
    assert out.factual is False and out.judged_valid is True  # the heuristic verdicts
    assert ts.score([out]).factual == 0.0


# -------------------------------------------------------------------- naturalisation
def _instance() -> Any:
    return generate(TGTConfig(n_instances=1, seed=1))[0]


def test_leaks_answer() -> None:
    assert leaks_answer("Has Leo's city changed from osaka?", "Osaka")
    assert leaks_answer("Is the north side of the atrium still his?", "north atrium")
    assert not leaks_answer("Is Leo still in the same city?", "Osaka")


def test_naturalise_rewrites_and_is_deterministic() -> None:
    inst = _instance()

    def reply(p: str) -> str:
        text = p.rsplit(": ", 1)[1] if "Note:" in p else p.rsplit("Question: ", 1)[1]
        return ("So, " + text) if "Note:" in p else ("Tell me: " + text)

    nat = Naturaliser(_model(reply))
    out = nat.instance(inst)
    assert nat.fallbacks == 0
    for old, new in zip(inst.memories, out.memories, strict=True):
        assert new.text == "So, " + strip_checkpoint(old.text) + old.text[
            len(strip_checkpoint(old.text)):]
        assert new.value == old.value and new.created_at_s == old.created_at_s
    assert all(n.text == "Tell me: " + o.text for o, n in zip(inst.queries, out.queries,
                                                              strict=True))
    calls = nat.calls
    assert nat.instance(inst) == out and nat.calls == calls  # cached per text


def test_naturalise_falls_back_when_a_query_leaks_its_answer() -> None:
    inst = _instance()
    value = {q.text: q.answer_value for q in inst.queries}

    def reply(p: str) -> str:
        if "Note:" in p:
            return p.rsplit("Note: ", 1)[1]
        q = p.rsplit("Question: ", 1)[1]
        return f"{q} Is it still {value[q]}?"  # FORBIDDEN ANSWER CONTENT

    nat = Naturaliser(_model(reply))
    out = nat.instance(inst)
    stale = [q for q in out.queries if q.kind == "staleness"]
    assert stale and all(not leaks_answer(q.text, q.answer_value) for q in out.queries)
    assert [q.text for q in out.queries] == [q.text for q in inst.queries]
    assert nat.query_fallbacks == len(inst.queries) and nat.memory_fallbacks == 0


def test_naturalise_falls_back_when_a_memory_drops_its_value() -> None:
    inst = _instance()
    nat = Naturaliser(_model(lambda p: "Something about someone was noted."
                             if "Note:" in p else "Anything new about them?"))
    out = nat.instance(inst)
    assert [m.text for m in out.memories] == [m.text for m in inst.memories]
    assert nat.memory_fallbacks == len(inst.memories) and nat.query_fallbacks == 0
    assert all(m.value.lower() in m.text.lower() for m in out.memories)


# ----------------------------------------------------------------------------- CLI
@pytest.mark.parametrize("extra", [["--systems", "B2-bm25,B6-rag"], ["--judge", "llm"],
                                   ["--naturalise"]])
def test_cli_llm_options_need_llm(extra: list[str], tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    from scrubjay.cli import main

    assert main(["bench", "tgt", "--out", str(tmp_path), "--no-progress", *extra]) == 2
    err = capsys.readouterr().err
    assert "chat model" in err and "--llm ollama:MODEL" in err
    assert not (tmp_path / "tgt.md").exists()


def test_cli_llm_error_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from scrubjay.cli import main

    assert main(["bench", "tgt", "--systems", "B7-rag-temporal", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "B7-rag-temporal" in err and "need a chat model" in err and "--llm" in err
    assert main(["bench", "tgt", "--llm", "openai:gpt", "--out", str(tmp_path)]) == 2
    assert "ollama:MODEL[@URL]" in capsys.readouterr().err
    assert not (tmp_path / "tgt.md").exists()


def test_cli_builds_chat_ollama() -> None:
    from langchain_ollama import ChatOllama
    from scrubjay.bench.cli import make_chat_model

    m, name = make_chat_model("ollama:qwen3:30b@http://gpu:11434")
    assert isinstance(m, ChatOllama) and m.model == "qwen3:30b"
    assert m.base_url == "http://gpu:11434" and name.startswith("ollama:qwen3:30b@http://gpu")
    m, _ = make_chat_model("ollama:llama3.2:3b")
    assert m.model == "llama3.2:3b" and m.base_url is None


def test_cli_passes_the_model_and_the_llm_default_list(monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    from scrubjay.bench import cli
    from scrubjay.cli import main

    fake = _model(lambda p: "x")
    seen: dict[str, Any] = {}

    def spy(**kw: Any) -> Any:
        seen.update(kw)
        raise RuntimeError("stop")

    monkeypatch.setattr(cli, "make_chat_model", lambda spec: (fake, "fake-model"))
    monkeypatch.setattr(rt, "run_tgt", spy)
    assert main(["bench", "tgt", "--llm", "ollama:m", "--judge", "llm", "--naturalise",
                 "--out", str(tmp_path)]) == 2
    assert seen["llm"] is fake and seen["llm_name"] == "fake-model"
    assert seen["judge"] == "llm" and seen["naturalise"] is True
    assert seen["systems"] is None  # run_tgt then uses DEFAULT_TGT_LLM_SYSTEMS


# ----------------------------------------------------------------------- end to end
def _echo_model(prompt: str) -> str:
    """B6/B7: the top memory, "stale" in B7 when older than 30 sessions; B1: no knowledge;
    judge: strict JSON from the heuristic; naturalisation: a harmless prefix."""
    if prompt.startswith("You grade"):
        value = re.search(r"Ground-truth value: (.*)\n", prompt).group(1)
        answer = prompt.rsplit("Answer: ", 1)[1]
        return json.dumps({"contains_value": ts.factual_correct(answer, value),
                           "judges_valid": not ts.judged_stale(answer)})
    if prompt.startswith("Rewrite this note"):
        return "Noted: " + prompt.rsplit("Note: ", 1)[1]
    if prompt.startswith("Rewrite this question"):
        return "Quick one: " + prompt.rsplit("Question: ", 1)[1]
    first = re.search(r"\n1\. (\[recorded ([\d.]+) sessions[^\]]*\] )?(.*)\n", prompt)
    if first is None:
        return "I cannot confirm that."
    stale = first.group(2) is not None and float(first.group(2)) > 30
    return first.group(3) + (" This is probably outdated." if stale else "")


def test_tgt_end_to_end_with_a_fake_model(tmp_path: Path) -> None:
    kw = {"seeds": 1, "instances": 2, "embedder": HashEmbedder(dim=32), "jobs": 1,
          "progress": False}
    systems = ("B3-dense", "B1-llm-only", "B6-rag", "B7-rag-temporal")
    res = rt.run_tgt(systems=systems, llm=_echo_model, llm_name="echo", **kw)
    s = res["systems"]
    # B6 answers with B3's top memory text: same factual score; judged valid throughout.
    assert s["B6-rag"]["factual"]["mean"] == pytest.approx(s["B3-dense"]["factual"]["mean"])
    assert s["B6-rag"]["staleness"]["mean"] == pytest.approx(s["B3-dense"]["staleness"]["mean"])
    # B7: same retrieval, but the age rule flips its judgement on old memories.
    assert s["B7-rag-temporal"]["factual"]["mean"] == pytest.approx(
        s["B6-rag"]["factual"]["mean"])
    # Hand count: judged stale past 30 sessions = I5 only; right on the 39 valid queries at
    # I1-I4 and the 9 invalid ones at I5 (A, B, C), of 66.
    assert s["B7-rag-temporal"]["staleness"]["mean"] == pytest.approx(48 / 66)
    assert s["B6-rag"]["staleness"]["mean"] == pytest.approx(42 / 66)
    # B1 knows nothing and always says it cannot confirm: judged stale everywhere.
    assert s["B1-llm-only"]["factual"]["mean"] == 0.0
    assert s["B1-llm-only"]["staleness"]["mean"] == pytest.approx(1 - 42 / 66)
    lm = res["llm"]
    assert lm["model"] == "echo" and lm["judge"] == "heuristic" and not lm["naturalise"]
    assert lm["system_call_failures"] == {n: 0 for n in LLM_SYSTEM_NAMES}
    md = rt.write_tgt(res, tmp_path)["md"].read_text()
    assert "| B7-rag-temporal |" in md and "LLM settings: chat model echo; heuristic judge" in md

    # The LLM judge mirroring the heuristic gives the same figures, with no fallbacks.
    res_j = rt.run_tgt(systems=systems, llm=_echo_model, llm_name="echo", judge="llm", **kw)
    assert res_j["llm"]["judge_fallbacks"] == 0 and res_j["llm"]["judge_calls"] > 0
    for name in systems:
        for metric in ("combined", "factual", "staleness"):
            assert res_j["systems"][name][metric]["mean"] == pytest.approx(
                s[name][metric]["mean"])
    # A judge that always says "value present, valid" lifts B1's factual score to 100%.
    yes = '{"contains_value": true, "judges_valid": true}'
    res_y = rt.run_tgt(systems=("B1-llm-only",), judge="llm", llm_name="yes",
                       llm=lambda p: yes if p.startswith("You grade") else "No idea.", **kw)
    assert res_y["systems"]["B1-llm-only"]["factual"]["mean"] == 1.0
    assert res_y["systems"]["B1-llm-only"]["staleness"]["mean"] == pytest.approx(42 / 66)

    # Naturalised texts (prefixes only) keep the figures close.
    prompts: list[str] = []

    def recording(prompt: str) -> str:
        prompts.append(prompt)
        return _echo_model(prompt)

    res2 = rt.run_tgt(systems=systems, llm=recording, llm_name="echo", judge="llm",
                      naturalise=True, **kw)
    answering = [p for p in prompts if p.startswith("Answer the question")]
    assert answering and all("Question: Quick one: " in p for p in answering)
    assert all("Noted: " in p for p in answering if "Memories:" in p)
    assert res2["llm"]["judge_fallbacks"] == 0 and res2["llm"]["naturalise"] is True
    nat = res2["llm"]["naturalisation"]
    assert nat["memory_fallbacks"] == 0 and nat["query_fallbacks"] == 0
    assert nat["queries"] == 2 * 66 and nat["memories"] == 2 * 96
    for name in systems:
        assert res2["systems"][name]["combined"]["mean"] == pytest.approx(
            s[name]["combined"]["mean"], abs=0.1)
    md2 = rt.tgt_markdown(res2)
    assert "LLM judge (" in md2 and "0 fallbacks" in md2 and "texts naturalised" in md2


def test_default_run_has_no_llm_output() -> None:
    res = rt.run_tgt(systems=("B3-dense",), seeds=1, instances=1,
                     embedder=HashEmbedder(dim=16), progress=False)
    assert "llm" not in res and "LLM" not in rt.tgt_markdown(res)
    with pytest.raises(ValueError, match="need a chat model"):
        rt.run_tgt(systems=("B1-llm-only",), seeds=1, instances=1,
                   embedder=HashEmbedder(dim=16), progress=False)
