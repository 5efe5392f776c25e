"""The RAG custom workflow: rewrite → retrieve → agent over a LangGraph store with an index.

The store is a real `InMemoryStore` with a semantic index over a deterministic local
embedding (`fathom.testing.hashed_embedding`); the models are `ScriptedModel`s, one for the
rewrite call and one for the agent, so each node's model calls are counted separately.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from fathom.patterns import RewrittenQuery, create_rag_workflow
from fathom.patterns.rag import RagStoreError
from fathom.testing import ScriptedModel, ScriptRequest, ai, hashed_embedding, tool_call

DOCS = {
    "finals": "The Las Vegas Aces won the 2023 WNBA finals against the New York Liberty.",
    "mvp": "A'ja Wilson of the Las Vegas Aces was the WNBA MVP in 2022.",
    "draft": "The WNBA draft takes place every April in New York.",
    "liberty": "The New York Liberty play their home games in Brooklyn.",
    "tennis": "Wimbledon is a tennis tournament played on grass in London.",
    "cooking": "Bake the bread at 220 degrees for thirty minutes.",
    "weather": "Rain is expected in Seattle on Monday.",
    "chess": "Magnus Carlsen is a Norwegian chess grandmaster.",
}


def indexed_store() -> InMemoryStore:
    store = InMemoryStore(index={"embed": hashed_embedding(128), "dims": 128})
    for key, text in DOCS.items():
        store.put(("docs",), key, {"text": text})
    return store


def rewriter(query: str = "wnba finals 2023 won") -> ScriptedModel:
    return ScriptedModel(policy=lambda r: ai("", tool_call("RewrittenQuery", {"query": query})))


def lookup_team(team: str) -> str:
    """Look up a team's city."""
    return f"{team} play in Las Vegas"


def tool_then_answer() -> ScriptedModel:
    def policy(request: ScriptRequest) -> AIMessage | str:
        if not request.tool_results:
            return ai("", tool_call("lookup_team", {"team": "Las Vegas Aces"}))
        first_doc = request.last_human_text.split("[1] ", 1)[1].split("\n", 1)[0]
        return f"From the documents: {first_doc}"

    return ScriptedModel(policy=policy)


def test_rewrite_retrieve_agent_run_in_order_with_the_expected_model_calls() -> None:
    rewrite_model, agent_model = rewriter(), tool_then_answer()
    rag = create_rag_workflow(
        agent_model, rewrite_model=rewrite_model, store=indexed_store(), tools=[lookup_team]
    )
    steps: list[tuple[str, int, int]] = []
    final: dict[str, Any] = {}
    for update in rag.stream({"question": "Who won the WNBA finals in 2023?"},
                             stream_mode="updates"):  # fmt: skip
        [(node, written)] = update.items()
        steps.append((node, rewrite_model.calls, agent_model.calls))
        final.update(written)

    # Order rewrite -> retrieve -> agent; 1 structured call, then 0, then at least 1.
    assert [s[0] for s in steps] == ["rewrite", "retrieve", "agent"]
    assert steps[0][1:] == (1, 0)
    assert steps[1][1:] == (1, 0)
    assert steps[2][1] == 1 and steps[2][2] >= 1
    assert rewrite_model.requests[0].tool_names == ["RewrittenQuery"]

    assert final["rewritten_query"] == "wnba finals 2023 won"
    assert 1 <= len(final["documents"]) <= 5
    assert final["documents"][0] == DOCS["finals"]  # best match first
    assert final["answer"] == f"From the documents: {DOCS['finals']}"
    agent_saw = agent_model.requests[0].last_human_text
    assert "Question: Who won the WNBA finals in 2023?" in agent_saw
    assert all(doc in agent_saw for doc in final["documents"])


def test_at_most_k_documents_are_retrieved() -> None:
    rag = create_rag_workflow(
        ScriptedModel(policy=lambda r: "ok"),
        rewrite_model=rewriter("wnba new york las vegas"),
        store=indexed_store(),
    )
    assert len(rag.invoke({"question": "anything"})["documents"]) == 5
    two = create_rag_workflow(
        ScriptedModel(policy=lambda r: "ok"), rewrite_model=rewriter(), store=indexed_store(), k=2
    )
    assert len(two.invoke({"question": "anything"})["documents"]) == 2


def test_the_async_run_makes_the_same_calls() -> None:
    rewrite_model, agent_model = rewriter(), tool_then_answer()
    rag = create_rag_workflow(
        agent_model, rewrite_model=rewrite_model, store=indexed_store(), tools=[lookup_team]
    )
    state = asyncio.run(rag.ainvoke({"question": "Who won the WNBA finals in 2023?"}))
    assert (rewrite_model.calls, agent_model.calls) == (1, 2)
    assert state["documents"][0] == DOCS["finals"]
    assert state["answer"].startswith("From the documents: The Las Vegas Aces")


def test_any_agent_can_be_the_agent_node_and_its_last_message_is_the_answer() -> None:
    own = create_agent(ScriptedModel(policy=lambda r: "the Aces"), name="sports_desk")
    rag = create_rag_workflow(
        rewriter(),
        agent=own,
        store=indexed_store(),
        checkpointer=InMemorySaver(),
    )
    state = rag.invoke({"question": "Who won?"}, {"configurable": {"thread_id": "rag"}})
    assert state["answer"] == "the Aces"


def test_an_invalid_rewrite_answer_searches_the_question_itself_without_asking_again() -> None:
    bad = ScriptedModel(policy=lambda r: "I would search for the finals.")
    rag = create_rag_workflow(
        ScriptedModel(policy=lambda r: "ok"), rewrite_model=bad, store=indexed_store()
    )
    state = rag.invoke({"question": "WNBA finals 2023 winner"})
    assert bad.calls == 1
    assert state["rewritten_query"] == "WNBA finals 2023 winner"
    assert state["documents"][0] == DOCS["finals"]


def test_a_store_without_an_index_or_no_store_is_a_clear_error() -> None:
    with pytest.raises(RagStoreError, match="this store has none"):
        create_rag_workflow(rewriter(), store=InMemoryStore())
    rag = create_rag_workflow(rewriter())
    with pytest.raises(RagStoreError, match="has no store to search"):
        rag.invoke({"question": "anything"})
    with pytest.raises(ValueError, match="k must be at least 1"):
        create_rag_workflow(rewriter(), k=0)


def test_the_rewrite_schema_is_the_structured_answer() -> None:
    assert set(RewrittenQuery.model_fields) == {"query"}


def test_the_embedding_is_deterministic_and_ranks_shared_words_higher() -> None:
    embed = hashed_embedding(32)
    [a, b, c] = embed(["WNBA finals", "wnba FINALS!", "bread recipe"])
    assert a == b
    assert embed(["WNBA finals"]) == [a]
    assert len(a) == 32 and abs(sum(v * v for v in a) - 1.0) < 1e-9
    dot = sum(x * y for x, y in zip(a, c, strict=True))
    assert dot < 0.99
    with pytest.raises(ValueError, match="dims must be at least 1"):
        hashed_embedding(0)


# --------------------------------------------------------------------------- the example


def test_the_example_runs_as_a_script() -> None:
    import subprocess
    import sys

    from .conftest import ROOT

    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "patterns" / "rag_workflow.py")],
        capture_output=True, text=True, timeout=100, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    for line in [
        "[rewrite] model calls: 1; wrote ['rewritten_query']",
        "[retrieve] model calls: 0; wrote ['documents']",
        "[agent] model calls: 2; wrote ['answer']",
        "document 1: The Las Vegas Aces won the 2023 WNBA championship",
        "answer: The Las Vegas Aces won in 2023. Roster: A'ja Wilson, Kelsey Plum",
    ]:
        assert line in done.stdout


def test_the_example_main_returns_the_run() -> None:
    from .conftest import load_example

    result = load_example("rag_workflow").main()
    assert [(s["node"], s["model_calls"]) for s in result["steps"]] == [
        ("rewrite", 1),
        ("retrieve", 0),
        ("agent", 2),
    ]
    assert len(result["documents"]) == 5
    assert result["answer"].startswith("The Las Vegas Aces won in 2023.")
