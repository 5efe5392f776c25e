"""Subagents: a `research-agent` with its own search tool and its own model.

Deep Agents tutorial, section 3.5 (子智能体) and section 8.3 (使用子智能体): the main
agent gets a `research_subagent` dict (`name`, `description`, `system_prompt`, `tools`,
and `model` as an optional override of the main agent's model) and delegates to it with
the `task` tool. The subagent works in a fresh context and only its final report goes back
to the main agent (section 6.8 / 8.1: context isolation).

Ported to fathom: only the import changes (`deepagents` → `fathom`). Offline stand-ins:

- `tavily_client.search` becomes a search over a small in-file corpus; `internet_search`
  keeps its signature and returns a Tavily-shaped dict.
- The main model `"claude-sonnet-4-6"` and the subagent's override `"openai:gpt-5.4"`
  become two `ScriptedModel`s (named after the models they replace), so the run shows
  which model served which call. The main model delegates in-depth questions to
  `research-agent` and answers from its report; the research model searches the web and
  the news, then writes a short report with sources.

The tutorial stops at `create_deep_agent(...)`; this port also runs the agent on one
question and prints what each agent saw.

Run: `.venv/bin/python examples/subagents_research.py`
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
    },
    {
        "title": "LangGraph: durable execution",
        "url": "https://docs.langchain.com/oss/python/langgraph/durable-execution",
        "topic": "general",
        "content": (
            "LangGraph checkpoints the agent's state after every step, so long-running "
            "agents resume where they stopped after a failure instead of starting over."
        ),
    },
    {
        "title": "LangGraph: human-in-the-loop",
        "url": "https://docs.langchain.com/oss/python/langgraph/interrupts",
        "topic": "general",
        "content": (
            "interrupt() pauses an agent until a person reviews its next step; the run "
            "resumes with Command(resume=...) on the same thread, so agents stay reliable "
            "around risky actions."
        ),
    },
    {
        "title": "LangChain agents",
        "url": "https://docs.langchain.com/oss/python/langchain/agents",
        "topic": "general",
        "content": "LangChain's create_agent builds a tool-calling agent on top of LangGraph.",
    },
    {
        "title": "LangGraph 1.0 released",
        "url": "https://blog.langchain.com/langgraph-1-0",
        "topic": "news",
        "content": "LangGraph reached 1.0 with a stable API for durable, stateful agents.",
    },
]

_STOPWORDS = {"what", "is", "the", "a", "an", "of", "and", "how", "does", "do", "about", "make"}


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
        results = [
            {
                "title": doc["title"],
                "url": doc["url"],
                "content": doc["content"],
                "score": round(overlap / max(len(wanted), 1), 2),
            }
            for overlap, doc in scored[:max_results]
        ]
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


# --------------------------------------------------------------------------- scripted models


def main_policy(request: ScriptRequest) -> AIMessage:
    """The main model: hand in-depth questions to research-agent, then answer from its report."""
    results = request.tool_results
    if not results:
        question = request.last_human_text
        description = (
            f"{question}\n\nSearch the web and the news, then reply with a short report: "
            "key findings as bullet points, each with its source URL."
        )
        return ai(
            "This needs in-depth research; I'll hand it to the research agent.",
            tool_call("task", {"subagent_type": "research-agent", "description": description}),
        )
    report = results[-1].text
    return ai(f"Here is what the research agent found.\n\n{report}")


def research_policy(request: ScriptRequest) -> AIMessage:
    """The research model: search the web and the news in parallel, then write the report."""
    question = request.last_human_text.split("\n", 1)[0]
    results = request.tool_results
    if not results:
        return ai(
            "",
            tool_call("internet_search", {"query": question, "max_results": 3}),
            tool_call("internet_search", {"query": question, "max_results": 1, "topic": "news"}),
        )
    found = [r for message in results for r in json.loads(message.text)["results"]]
    lines = [f"## Report: {question}", "", "Key findings:"]
    lines += [f"- {r['content']} ({r['url']})" for r in found]
    return ai("\n".join(lines))


def make_models() -> tuple[ScriptedModel, ScriptedModel]:
    main_model = ScriptedModel(policy=main_policy, model_name="claude-sonnet-4-6")
    research_model = ScriptedModel(policy=research_policy, model_name="gpt-5.4")
    return main_model, research_model


# --------------------------------------------------------------------------- the tutorial


def build_agent(main_model: ScriptedModel, research_model: ScriptedModel):
    research_subagent = {
        "name": "research-agent",
        "description": "Used to research more in depth questions",
        "system_prompt": "You are a great researcher",
        "tools": [internet_search],
        "model": research_model,  # was: "openai:gpt-5.4"  (Optional override)
    }
    subagents = [research_subagent]

    agent = create_deep_agent(
        model=main_model,  # was: "claude-sonnet-4-6"
        subagents=subagents,
    )
    return agent


# --------------------------------------------------------------------------- the run

QUESTION = "How does LangGraph make long-running agents reliable?"


def _calls(message: AIMessage) -> str:
    return ", ".join(
        f"{c['name']}(" + ", ".join(f"{k}={v!r}" for k, v in c["args"].items()) + ")"
        for c in message.tool_calls
    )


def _kinds(messages: list[Any]) -> list[str]:
    return [m.type for m in messages]


def main() -> dict[str, Any]:
    """Run the main agent on one question; return its state and what each model was sent."""
    main_model, research_model = make_models()
    agent = build_agent(main_model, research_model)

    print(f"User: {QUESTION}\n")
    result = agent.invoke({"messages": [{"role": "user", "content": QUESTION}]})

    # The task tool waits for the subagent, so its calls fall between the main agent's two.
    main_calls, research_calls = main_model.requests, research_model.requests
    timeline = [
        ("main agent (claude-sonnet-4-6)", main_calls[0]),
        *[("research-agent (openai:gpt-5.4)", request) for request in research_calls],
        *[("main agent (claude-sonnet-4-6)", request) for request in main_calls[1:]],
    ]
    for label, request in timeline:
        response = request.response
        print(f"{label}: {_calls(response) if response.tool_calls else 'answers'}")
    print()
    print(result["messages"][-1].content)

    first = research_model.requests[0]
    main_seen = [m for request in main_model.requests for m in request.messages]
    search_results_seen = [
        m for m in main_seen if isinstance(m, ToolMessage) and m.name == "internet_search"
    ]
    print("\nContext isolation:")
    print(
        f"  research-agent's first request: {len(first.messages)} messages "
        f"({', '.join(_kinds(first.messages))}): its system prompt and the task description"
    )
    print(f"  research-agent's system prompt starts with: {first.system_prompt[:26]!r}")
    print(f"  main agent's messages: {', '.join(_kinds(result['messages']))}")
    print(f"  internet_search results the main agent saw: {len(search_results_seen)}")
    print(
        f"  model calls: claude-sonnet-4-6: {main_model.calls}, openai:gpt-5.4: "
        f"{research_model.calls}"
    )
    return {
        "state": result,
        "main_requests": main_model.requests,
        "research_requests": research_model.requests,
        "question": QUESTION,
    }


if __name__ == "__main__":
    main()
