"""RAG as a custom workflow: rewrite → retrieve → agent over a LangGraph store's index.

A small WNBA knowledge base in an `InMemoryStore` with a semantic index. The question is
rewritten into a search query (one structured call), the store's index is searched for at
most five documents (no model call), and an agent with a roster tool answers from them.
Each node's model calls are counted as the run streams its updates.

Offline, the models are `ScriptedModel`s whose policies decide from what they are sent, and
the index uses `fathom.testing.hashed_embedding` (a deterministic word-hashing embedding);
with `--model provider:model` the rewrite and the agent use that model (the index stays
local; in production give the store real embeddings, e.g. LangChain's `init_embeddings`).

Run: `.venv/bin/python examples/patterns/rag_workflow.py [--model openai:gpt-4.1]`
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from langchain.chat_models import init_chat_model
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langgraph.store.memory import InMemoryStore

from fathom.patterns import create_rag_workflow
from fathom.testing import ScriptedModel, ScriptRequest, ai, hashed_embedding, tool_call

QUESTION = "Who won the WNBA championship in 2023, and who was on their roster?"

DOCS = {
    "finals-2023": "The Las Vegas Aces won the 2023 WNBA championship, beating the New York "
    "Liberty 3-1 in the finals.",
    "finals-2022": "The Las Vegas Aces won the 2022 WNBA championship against the Connecticut "
    "Sun.",
    "mvp-2023": "Breanna Stewart of the New York Liberty was the 2023 WNBA MVP.",
    "draft": "The WNBA draft takes place every April.",
    "arena": "The New York Liberty play their home games at Barclays Center in Brooklyn.",
    "expansion": "The Golden State Valkyries joined the WNBA as an expansion team in 2025.",
    "tennis": "Wimbledon is played on grass courts in London.",
}
ROSTERS = {"Las Vegas Aces": "A'ja Wilson, Kelsey Plum, Jackie Young, Chelsea Gray"}


def get_roster(team: str) -> str:
    """Look up a WNBA team's current roster."""
    return ROSTERS.get(team, f"No roster for {team!r}.")


def build_store() -> InMemoryStore:
    """The knowledge base: every document under `("docs",)`, indexed on its text."""
    store = InMemoryStore(index={"embed": hashed_embedding(256), "dims": 256})
    for key, text in DOCS.items():
        store.put(("docs",), key, {"text": text})
    return store


def rewrite_policy(request: ScriptRequest) -> AIMessage:
    """Keep the content words of the question as the query."""
    words = re.findall(r"[A-Za-z0-9]+", request.last_human_text)
    stop = {"who", "the", "in", "and", "was", "on", "their"}
    query = " ".join(w.lower() for w in words if w.lower() not in stop)
    return ai("", tool_call("RewrittenQuery", {"query": query}))


def agent_policy(request: ScriptRequest) -> AIMessage | str:
    """Read the winner from the documents, look its roster up, then answer."""
    text = request.last_human_text
    winner = re.search(r"\] The (.+?) won the 2023", text)
    team = winner.group(1) if winner else "unknown"
    if not request.tool_results:
        return ai("", tool_call("get_roster", {"team": team}))
    return f"The {team} won in 2023. Roster: {request.tool_results[-1].text}."


def main(model: BaseChatModel | None = None) -> dict[str, Any]:
    """Run the question through the workflow; return what each node did."""
    rewrite_model = model or ScriptedModel(policy=rewrite_policy)
    agent_model = model or ScriptedModel(policy=agent_policy)
    rag = create_rag_workflow(
        agent_model, rewrite_model=rewrite_model, store=build_store(), tools=[get_roster]
    )
    calls = (lambda: getattr(rewrite_model, "calls", 0), lambda: getattr(agent_model, "calls", 0))
    steps: list[dict[str, Any]] = []
    state: dict[str, Any] = {}
    before = (0, 0)
    for update in rag.stream({"question": QUESTION}, stream_mode="updates"):
        for node, written in update.items():
            now = (calls[0](), calls[1]())
            steps.append({"node": node, "model_calls": now[0] - before[0] + now[1] - before[1]})
            before = now
            state.update(written)
            print(f"[{node}] model calls: {steps[-1]['model_calls']}; wrote {sorted(written)}")
    print(f"rewritten_query: {state['rewritten_query']}")
    for index, document in enumerate(state["documents"], 1):
        print(f"document {index}: {document}")
    print(f"answer: {state['answer']}")
    return {**state, "steps": steps}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="provider:model for rewrite and agent (default: scripted)")
    arguments = parser.parse_args()
    main(init_chat_model(arguments.model) if arguments.model else None)
