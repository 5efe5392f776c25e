"""Custom tools: give the agent an `internet_search` tool next to the built-in ones.

Deep Agents tutorial, section 3.2 (工具 / Tools): besides the built-in tools for planning
and files, a deep agent takes custom tools; a plain Python function works, its signature
and docstring become the tool's schema.

Ported to fathom: only the import changes (`deepagents` → `fathom`). Offline stand-ins:
`internet_search` searches a small in-file corpus and returns a Tavily-shaped dict, and the
hosted model becomes a `ScriptedModel` that calls `internet_search` with `topic="news"` and
answers from the results.

Run: `.venv/bin/python examples/custom_tools.py`
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from langchain_core.messages import AIMessage

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

# --------------------------------------------------------------------------- offline search

CORPUS: list[dict[str, str]] = [
    {
        "title": "LangGraph 1.0 released",
        "url": "https://blog.langchain.com/langgraph-1-0",
        "topic": "news",
        "content": "LangGraph reached 1.0 with a stable API for durable, stateful agents.",
    },
    {
        "title": "Deep Agents adds async subagents",
        "url": "https://blog.langchain.com/deep-agents-async-subagents",
        "topic": "news",
        "content": "Deep Agents can now launch subagents that run in the background.",
    },
    {
        "title": "LangGraph overview",
        "url": "https://docs.langchain.com/oss/python/langgraph/overview",
        "topic": "general",
        "content": "LangGraph is a low-level orchestration framework for stateful agents.",
    },
    {
        "title": "Chip makers rally",
        "url": "https://markets.example.com/chip-makers-rally",
        "topic": "finance",
        "content": "Semiconductor stocks rose 3% on strong data-centre demand.",
    },
]


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
        words = set(re.findall(r"[a-z0-9]+", query.lower()))
        results = []
        for doc in CORPUS:
            text = (doc["title"] + " " + doc["content"]).lower()
            if doc["topic"] == topic and words & set(re.findall(r"[a-z0-9]+", text)):
                result = {"title": doc["title"], "url": doc["url"], "content": doc["content"]}
                if include_raw_content:
                    result["raw_content"] = doc["content"]
                results.append(result)
        return {"query": query, "results": results[:max_results]}


tavily_client = OfflineTavilyClient()  # was: TavilyClient(api_key=os.environ["TAVILY_API_KEY"])


# --------------------------------------------------------------------------- the tutorial


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


def news_policy(request: ScriptRequest) -> AIMessage:
    """Search the news once, then list the headlines found."""
    if not request.tool_results:
        args = {"query": "LangGraph deep agents", "max_results": 3, "topic": "news"}
        return ai("", tool_call("internet_search", args))
    results = json.loads(str(request.tool_results[-1].text))["results"]
    lines = [f"- {r['title']}: {r['content']} ({r['url']})" for r in results]
    return ai("Latest news:\n" + "\n".join(lines))


def main() -> dict[str, Any]:
    """Ask for news; return the final state and the tools the model was offered."""
    model = ScriptedModel(policy=news_policy)
    agent = create_deep_agent(
        model=model,  # was: "google_genai:gemini-3.1-pro-preview"
        tools=[internet_search],
    )
    result = agent.invoke(
        {"messages": [{"role": "user", "content": "Any news about LangGraph or Deep Agents?"}]}
    )
    tools_offered = model.requests[0].tool_names
    print(f"Tools offered to the model: {', '.join(sorted(tools_offered))}")
    print(result["messages"][-1].content)
    schema = next(t for t in model.requests[0].tools if t["function"]["name"] == "internet_search")
    return {"state": result, "tools_offered": tools_offered, "internet_search_schema": schema}


if __name__ == "__main__":
    main()
