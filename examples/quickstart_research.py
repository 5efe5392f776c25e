"""Quick start: a research agent with an `internet_search` tool.

Deep Agents tutorial, section 2 (起步 / Getting started), steps 3–5: create the search
tool, create the deep agent with `research_instructions`, run it on "What is langgraph?".

Ported to fathom: only the import changes (`deepagents` → `fathom`). Offline stand-ins:

- `tavily_client.search` becomes a search over a small in-file corpus; `internet_search`
  keeps its signature and returns a Tavily-shaped dict (`{"results": [{title, url,
  content}, ...]}`).
- The hosted model becomes a `ScriptedModel` whose policy behaves as the tutorial says a
  deep agent does: plan with `write_todos`, call `internet_search`, offload the results to
  a notes file with `write_file`, read them back with `read_file`, then answer.

The tutorial leaves out the `create_deep_agent(...)` line of step 4; this port uses the one
from the Deep Agents quick start: `create_deep_agent(model=..., tools=[internet_search],
system_prompt=research_instructions)`.

Run: `.venv/bin/python examples/quickstart_research.py`
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from langchain_core.messages import AIMessage, ToolMessage

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

# --------------------------------------------------------------------------- offline search

CORPUS: list[dict[str, str]] = [
    {
        "title": "LangGraph overview",
        "url": "https://docs.langchain.com/oss/python/langgraph/overview",
        "topic": "general",
        "content": (
            "LangGraph is a low-level orchestration framework and runtime for building, "
            "managing and deploying long-running, stateful agents."
        ),
        "raw_content": (
            "LangGraph is a low-level orchestration framework and runtime for building, "
            "managing and deploying long-running, stateful agents. It models an agent as a "
            "graph of nodes that read and write a shared state."
        ),
    },
    {
        "title": "LangGraph: durable execution and human-in-the-loop",
        "url": "https://docs.langchain.com/oss/python/langgraph/durable-execution",
        "topic": "general",
        "content": (
            "LangGraph checkpoints the graph state after every step, so agents can resume "
            "after failures, pause for human review with interrupts, and keep memory across "
            "turns of a thread."
        ),
        "raw_content": (
            "Checkpointers save the state of every super-step. With a thread_id a run can "
            "be resumed; interrupt() pauses a run until a Command(resume=...) arrives."
        ),
    },
    {
        "title": "LangChain agents",
        "url": "https://docs.langchain.com/oss/python/langchain/agents",
        "topic": "general",
        "content": (
            "LangChain's create_agent builds a tool-calling agent on top of LangGraph, with "
            "middleware hooks around model and tool calls."
        ),
        "raw_content": "create_agent(model, tools, middleware=[...]) returns a LangGraph graph.",
    },
    {
        "title": "Deep Agents",
        "url": "https://docs.langchain.com/oss/python/deepagents/overview",
        "topic": "general",
        "content": (
            "Deep Agents is an agent harness built on LangChain and LangGraph: planning with "
            "write_todos, a virtual filesystem, subagents and long-term memory."
        ),
        "raw_content": "create_deep_agent(model, tools, system_prompt=...) returns a graph.",
    },
    {
        "title": "LangGraph 1.0 released",
        "url": "https://blog.langchain.com/langgraph-1-0",
        "topic": "news",
        "content": "LangGraph reached 1.0 with a stable API for durable, stateful agents.",
        "raw_content": "LangGraph 1.0 is out. The release stabilises the graph API.",
    },
]

_STOPWORDS = {"what", "is", "the", "a", "an", "of", "and", "how", "does", "do", "about"}


def _terms(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOPWORDS}


class OfflineTavilyClient:
    """Answers `search` from `CORPUS`, in the shape of Tavily's response."""

    def search(
        self,
        query: str,
        *,
        max_results: int = 5,
        include_raw_content: bool = False,
        topic: str = "general",
    ) -> dict[str, Any]:
        wanted = _terms(query)
        scored = []
        for doc in CORPUS:
            if doc["topic"] != topic:
                continue
            overlap = len(wanted & _terms(doc["title"] + " " + doc["content"]))
            if overlap:
                scored.append((overlap, doc))
        scored.sort(key=lambda pair: -pair[0])
        results = []
        for overlap, doc in scored[:max_results]:
            result = {
                "title": doc["title"],
                "url": doc["url"],
                "content": doc["content"],
                "score": round(overlap / max(len(wanted), 1), 2),
            }
            if include_raw_content:
                result["raw_content"] = doc["raw_content"]
            results.append(result)
        return {"query": query, "results": results}


tavily_client = OfflineTavilyClient()  # was: TavilyClient(api_key=os.environ["TAVILY_API_KEY"])


def internet_search(
    query: str,
    max_results: int = 5,
    topic: Literal["general", "news", "finance"] = "general",
    include_raw_content: bool = False,
):
    """Run a web search"""
    return tavily_client.search(
        query,
        max_results=max_results,
        include_raw_content=include_raw_content,
        topic=topic,
    )


# --------------------------------------------------------------------------- scripted model

NOTES_PATH = "/research/langgraph_notes.md"


def _todos(*statuses: str) -> list[dict[str, str]]:
    steps = [
        "Search the web for what LangGraph is",
        f"Save the search results to {NOTES_PATH}",
        "Read the notes back and check them",
        "Write the report",
    ]
    return [{"content": c, "status": s} for c, s in zip(steps, statuses, strict=True)]


def _called(request: ScriptRequest) -> list[str]:
    return [
        call["name"]
        for message in request.messages
        if isinstance(message, AIMessage)
        for call in message.tool_calls
    ]


def _tool_output(request: ScriptRequest, name: str) -> str:
    for message in reversed(request.messages):
        if isinstance(message, ToolMessage) and message.name == name:
            return str(message.text)
    raise LookupError(f"no {name} result in the conversation")


def research_policy(request: ScriptRequest) -> AIMessage:
    """What a sensible research model does next, judged from the conversation so far."""
    called = _called(request)
    question = request.last_human_text
    if "write_todos" not in called:
        return ai(
            "I'll plan the research first.",
            tool_call("write_todos", {"todos": _todos("in_progress", *["pending"] * 3)}),
        )
    if "internet_search" not in called:
        return ai("", tool_call("internet_search", {"query": question, "max_results": 3}))
    if "write_file" not in called:
        results = json.loads(_tool_output(request, "internet_search"))["results"]
        notes = "\n".join(
            ["# Notes: " + question, ""]
            + [f"- {r['content']} (source: {r['title']}, {r['url']})" for r in results]
        )
        return ai(
            "Saving the search results to a notes file.",
            tool_call("write_file", {"file_path": NOTES_PATH, "content": notes}),
            tool_call(
                "write_todos", {"todos": _todos("completed", "in_progress", "pending", "pending")}
            ),
        )
    if "read_file" not in called:
        return ai("", tool_call("read_file", {"file_path": NOTES_PATH}))
    if called.count("write_todos") < 3:
        return ai("", tool_call("write_todos", {"todos": _todos(*["completed"] * 4)}))
    # read_file numbers its lines ("     3\t- ..."); keep the bullet points.
    numbered = _tool_output(request, "read_file").splitlines()
    bullets = [line.split("\t", 1)[1] for line in numbered if "\t- " in line]
    facts = [re.sub(r" \(source: .*\)$", "", b[2:]) for b in bullets]
    sources = [re.search(r"\(source: (.*)\)$", b).group(1) for b in bullets]
    report = "\n".join(
        ["## What is LangGraph?", "", " ".join(facts), "", "### Sources"]
        + [f"- {s}" for s in sources]
    )
    return ai(report)


def make_model() -> ScriptedModel:
    return ScriptedModel(policy=research_policy)


# --------------------------------------------------------------------------- the tutorial

# System prompt to steer the agent to be an expert researcher
research_instructions = """You are an expert researcher. Your job is to conduct thorough research and then write a polished report.

You have access to an internet search tool as your primary means of gathering information.

## `internet_search`

Use this to run an internet search for a given query. You can specify the max number of results to return, the topic, and whether raw content should be included.
"""  # noqa: E501


def main() -> dict[str, Any]:
    """Run the research agent on "What is langgraph?" and return its final state."""
    model = make_model()  # was: "google_genai:gemini-3.1-pro-preview" (or a model instance)
    agent = create_deep_agent(
        model=model,
        tools=[internet_search],
        system_prompt=research_instructions,
    )

    result = agent.invoke({"messages": [{"role": "user", "content": "What is langgraph?"}]})

    # Print the agent's response
    print(result["messages"][-1].content)
    return result


if __name__ == "__main__":
    main()
