"""A `CompiledSubAgent`: any compiled LangGraph graph as a subagent.

Deep Agents tutorial, section 8.4 (使用编译的子智能体): for complex cases a subagent can be
a prebuilt graph, made with LangChain's `create_agent` or with the graph API, wrapped in
`CompiledSubAgent(name="data-analyzer", description=..., runnable=custom_graph)`. A custom
graph must have a state key named `"messages"`, and must be compiled (`.compile()`) first
(section 8.2). The parent receives the text of the graph's last AI message.

Ported to fathom: only the import changes (`deepagents` → `fathom`). Other changes:

- The tutorial passes `prompt=` to `create_agent`; LangChain 1.x calls that parameter
  `system_prompt=` (`prompt=` is a `TypeError`), so the port uses `system_prompt=`.
- `your_model` and `"google_genai:gemini-3.1-pro-preview"` become `ScriptedModel`s: the
  analyst model calls `compute_statistics` (the `specialized_tools`) and reads the result;
  the main model hands data analysis to `data-analyzer` and answers from its result.
- `internet_search` runs over a one-document in-file corpus; `research_instructions` is the
  one from the quick start (section 2).

The same `data-analyzer` is then built the other way the tutorial names: a hand-written
`StateGraph` (`messages` plus a `numbers` key, two nodes, no model) compiled with
`.compile()`. Last, the two mistakes section 8.2 warns about are shown: an uncompiled graph
and a state without `messages` are refused when the agent is built.

Run: `.venv/bin/python examples/compiled_subagent.py`
"""

from __future__ import annotations

import json
import re
import statistics
from typing import Annotated, Any, Literal

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, AnyMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from fathom import CompiledSubAgent, create_deep_agent
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

# --------------------------------------------------------------------------- tools


def internet_search(
    query: str,
    max_results: int = 5,
    topic: Literal["general", "news", "finance"] = "general",
    include_raw_content: bool = False,
):
    """Run a web search"""
    # was: tavily_client.search(...); offline, one document
    return {
        "query": query,
        "results": [
            {
                "title": "Reading growth metrics",
                "url": "https://example.com/growth-metrics",
                "content": "Compare the last period with the first, not with the best one.",
            }
        ][:max_results],
    }


def compute_statistics(numbers: list[float]) -> dict[str, float]:
    """Compute count, mean, median, min, max and the change from the first to the last value."""
    first, last = numbers[0], numbers[-1]
    return {
        "count": len(numbers),
        "mean": round(statistics.fmean(numbers), 2),
        "median": statistics.median(numbers),
        "min": min(numbers),
        "max": max(numbers),
        "change_pct": round((last - first) / first * 100, 1),
    }


specialized_tools = [compute_statistics]

# System prompt to steer the agent to be an expert researcher (section 2)
research_instructions = """You are an expert researcher. Your job is to conduct thorough research and then write a polished report.

You have access to an internet search tool as your primary means of gathering information.

## `internet_search`

Use this to run an internet search for a given query. You can specify the max number of results to return, the topic, and whether raw content should be included.
"""  # noqa: E501

# --------------------------------------------------------------------------- scripted models


def _numbers(text: str) -> list[float]:
    return [float(n) for n in re.findall(r"\d+(?:\.\d+)?", text)]


def _verdict(stats: dict[str, Any]) -> str:
    trend = "up" if stats["change_pct"] > 0 else "down"
    return (
        f"Mean {stats['mean']:g}, median {stats['median']:g}, range {stats['min']:g}-"
        f"{stats['max']:g}; {stats['change_pct']:+g}% from the first value to the last: "
        f"the trend is {trend}."
    )


def analyst_policy(request: ScriptRequest) -> AIMessage:
    """`your_model`: compute the statistics with the tool, then state the result briefly."""
    results = request.tool_results
    if not results:
        numbers = _numbers(request.last_human_text)
        return ai("", tool_call("compute_statistics", {"numbers": numbers}))
    stats = json.loads(results[-1].text)
    return ai(_verdict(stats))


def main_policy(request: ScriptRequest) -> AIMessage:
    """The main model: data analysis goes to data-analyzer; answer from what it returns."""
    results = request.tool_results
    if not results:
        numbers = ", ".join(f"{n:g}" for n in _numbers(request.last_human_text))
        description = (
            f"Analyze these weekly sign-up counts: {numbers}. Compute the statistics and say "
            "whether the trend is up or down, in one sentence."
        )
        return ai(
            "", tool_call("task", {"subagent_type": "data-analyzer", "description": description})
        )
    return ai(f"The data-analyzer's result: {results[-1].text}")


def your_model() -> ScriptedModel:
    return ScriptedModel(policy=analyst_policy)


def main_model() -> ScriptedModel:
    return ScriptedModel(policy=main_policy)  # was: "google_genai:gemini-3.1-pro-preview"


# --------------------------------------------------------------------------- the tutorial


def build_with_create_agent(analyst_model: ScriptedModel, model: ScriptedModel):
    # Create a custom agent graph
    custom_graph = create_agent(
        model=analyst_model,  # was: your_model
        tools=specialized_tools,
        system_prompt="You are a specialized agent for data analysis...",  # was: prompt=
    )

    # Use it as a custom subagent
    custom_subagent = CompiledSubAgent(
        name="data-analyzer",
        description="Specialized agent for complex data analysis tasks",
        runnable=custom_graph,
    )

    subagents = [custom_subagent]

    agent = create_deep_agent(
        model=model,  # was: "google_genai:gemini-3.1-pro-preview"
        tools=[internet_search],
        system_prompt=research_instructions,
        subagents=subagents,
    )
    return agent


# ---- the same subagent as a hand-written graph (graph API); it needs a "messages" key


class AnalyzerState(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    numbers: list[float]


def extract(state: AnalyzerState) -> dict[str, Any]:
    return {"numbers": _numbers(state["messages"][-1].text)}


def summarize(state: AnalyzerState) -> dict[str, Any]:
    stats = compute_statistics(state["numbers"])
    return {"messages": [AIMessage(content=_verdict(stats))]}


def analyzer_graph_builder() -> StateGraph:
    builder = StateGraph(AnalyzerState)
    builder.add_node("extract", extract)
    builder.add_node("summarize", summarize)
    builder.add_edge(START, "extract")
    builder.add_edge("extract", "summarize")
    builder.add_edge("summarize", END)
    return builder


def build_with_state_graph(model: ScriptedModel):
    custom_graph = analyzer_graph_builder().compile()

    custom_subagent = CompiledSubAgent(
        name="data-analyzer",
        description="Specialized agent for complex data analysis tasks",
        runnable=custom_graph,
    )
    return create_deep_agent(
        model=model,
        tools=[internet_search],
        system_prompt=research_instructions,
        subagents=[custom_subagent],
    )


# --------------------------------------------------------------------------- the run

QUESTION = "Our weekly sign-ups were 120, 135, 150, 110, 160. Is the trend up or down?"


def _run(agent: Any) -> dict[str, Any]:
    result = agent.invoke({"messages": [{"role": "user", "content": QUESTION}]})
    task_result = next(m for m in result["messages"] if m.type == "tool")
    print(f"  ToolMessage from data-analyzer: {task_result.content}")
    print(f"  answer: {result['messages'][-1].content}")
    return result


def _refused(runnable: Any) -> str:
    try:
        create_deep_agent(
            model=main_model(),
            subagents=[
                CompiledSubAgent(name="data-analyzer", description="...", runnable=runnable)
            ],
        )
    except (TypeError, ValueError) as error:
        return f"{type(error).__name__}: {error}"
    return "accepted"


class NoMessagesState(TypedDict):
    numbers: list[float]


def main() -> dict[str, Any]:
    """Run both versions of data-analyzer; return their states and the refusals."""
    print(f"User: {QUESTION}")

    print("data-analyzer built with create_agent:")
    analyst_model = your_model()
    by_create_agent = _run(build_with_create_agent(analyst_model, main_model()))
    print(f"  the analyst model made {analyst_model.calls} calls (compute_statistics, answer)")

    print("data-analyzer built as a StateGraph and compiled:")
    by_state_graph = _run(build_with_state_graph(main_model()))

    print("refused when the agent is built:")
    uncompiled = _refused(analyzer_graph_builder())
    print(f"  without .compile(): {uncompiled}")
    builder = StateGraph(NoMessagesState)
    builder.add_node("noop", lambda state: {})
    builder.add_edge(START, "noop")
    no_messages = _refused(builder.compile())
    print(f"  state without 'messages': {no_messages}")
    return {
        "create_agent": by_create_agent,
        "analyst_requests": analyst_model.requests,
        "state_graph": by_state_graph,
        "refused": {"uncompiled": uncompiled, "no_messages": no_messages},
    }


if __name__ == "__main__":
    main()
