"""Streaming subagents: progress, tokens and custom events, told apart by namespace.

Deep Agents tutorial, section 16 (流), with section 8.5 (the `lc_agent_name` metadata):
`agent.stream(..., subgraphs=True, version="v2")` yields `{"type", "ns", "data"}` parts.
`ns` is `()` for the main agent and `("tools:<id>",)` for a subagent started by the main
agent's `task` tool, so `any(s.startswith("tools:") for s in chunk["ns"])` tells them apart.

- 16.3 `stream_mode="updates"`: one update per finished step, printed as
  `[main agent] step: ...` and `  [tools:<id>] step: ...`; the main agent's `tools` update
  carries the subagent's result as the `task` ToolMessage.
- 16.4 `stream_mode="messages"`: LLM tokens with their source namespace; the metadata's
  `lc_agent_name` is `main-agent` (the main agent's `name=`, section 8.5) or the subagent's
  name.
- 16.6 `stream_mode="custom"`: `get_stream_writer()` inside the analyst subagent's tool.
- 16.7 several modes at once: `stream_mode=["updates", "messages", "custom"]`.

Ported to fathom: only the import changes (`deepagents` → `fathom`). Other changes:

- The hosted model becomes one `ScriptedModel` per agent, shared by the main agent and its
  subagent and told apart by system prompt; it streams its answers in 8-character chunks.
  The researcher saves its notes with `write_file`, then answers in 2-3 sentences; the
  analyst calls `analyze_data`; the coordinator delegates and sums up in one sentence.
- fathom's agent loop names its nodes `model` and `tools` (LangChain's `create_agent`
  names); the tutorial's output shows `model_request`. So the section 16.7 filter reads
  `INTERESTING_NODES = {"model", "tools"}`, and the section 16.3 output has
  `step: model`, plus middleware steps such as `PatchToolCallsMiddleware.before_agent`.
- The `<id>` in `tools:<id>` is the LangGraph task id of the tool call, not the model's
  `tool_call_id` (the tutorial's section 16.8 says the same; 16.2 calls it the tool call id).
- Both agents get `name="main-agent"` (section 8.5), so `lc_agent_name` is set for both.

Run: `.venv/bin/python examples/subagent_streaming.py`
"""

from __future__ import annotations

import time
from typing import Any

from langchain.tools import tool
from langchain_core.messages import AIMessage
from langgraph.config import get_stream_writer

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

# --------------------------------------------------------------------------- scripted model

SUMMARIES = {
    "ai safety": (
        "AI safety research works on keeping AI systems reliable and aligned with human "
        "intent. Current work covers dangerous-capability evaluations, interpretability of "
        "model internals and oversight methods that scale."
    ),
    "quantum computing": (
        "Quantum error correction now makes logical qubits better than physical ones. "
        "Hardware is scaling past a thousand qubits."
    ),
}


def _first_sentence(text: str) -> str:
    return text.split(". ")[0].rstrip(".") + "."


def researcher_turn(request: ScriptRequest) -> AIMessage:
    topic = request.last_human_text.lower()
    summary = next((s for key, s in SUMMARIES.items() if key in topic), "Nothing found.")
    if not request.tool_results:
        notes = {"file_path": "/research/notes.md", "content": summary}
        return ai("Saving my notes first.", tool_call("write_file", notes))
    return ai(summary)


def analyst_turn(request: ScriptRequest) -> AIMessage:
    if not request.tool_results:
        topic = request.last_human_text.removeprefix("Analyze ").removeprefix("the ")
        return ai("", tool_call("analyze_data", {"topic": topic}))
    return ai(f"Result: {request.tool_results[-1].text}")


def coordinator_turn(request: ScriptRequest, subagent: str) -> AIMessage:
    if not request.tool_results:
        task = {"subagent_type": subagent, "description": request.last_human_text}
        return ai("Delegating to the " + subagent + ".", tool_call("task", task))
    return ai(_first_sentence(request.tool_results[-1].text.removeprefix("Result: ")))


def policy(request: ScriptRequest) -> AIMessage:
    prompt = request.system_prompt or ""
    if prompt.startswith("You are a thorough researcher"):
        return researcher_turn(request)
    if prompt.startswith("You are a data analyst"):
        return analyst_turn(request)
    return coordinator_turn(request, "analyst" if "analyst" in prompt else "researcher")


def model() -> ScriptedModel:
    return ScriptedModel(policy=policy)  # was: "google_genai:gemini-3.1-pro-preview"


# --------------------------------------------------------------------------- the agents


def research_agent():
    """Section 16.3's coordinator with a researcher subagent (no tools: it inherits them)."""
    agent = create_deep_agent(
        model=model(),
        system_prompt=(
            "You are a project coordinator. Always delegate research tasks "
            "to your researcher subagent using the task tool. Keep your final response to "
            "one sentence."
        ),
        subagents=[
            {
                "name": "researcher",
                "description": "Researches topics thoroughly",
                "system_prompt": (
                    "You are a thorough researcher. Research the given topic "
                    "and provide a concise summary in 2-3 sentences."
                ),
            },
        ],
        name="main-agent",
    )
    return agent


@tool
def analyze_data(topic: str) -> str:
    """Run a data analysis on a given topic.

    This tool performs the actual analysis and emits progress updates.
    You MUST call this tool for any analysis request.
    """
    writer = get_stream_writer()

    writer({"status": "starting", "topic": topic, "progress": 0})
    time.sleep(0.5)

    writer({"status": "analyzing", "progress": 50})
    time.sleep(0.5)

    writer({"status": "complete", "progress": 100})
    return (
        f'Analysis of "{topic}": Customer sentiment is 85% positive, '
        "driven by product quality and support response times."
    )


def analyst_agent():
    """Section 16.6's coordinator with an analyst subagent that emits custom events."""
    agent = create_deep_agent(
        model=model(),
        system_prompt=(
            "You are a coordinator. For any analysis request, you MUST delegate "
            "to the analyst subagent using the task tool. Never try to answer directly. "
            "After receiving the result, summarize it in one sentence."
        ),
        subagents=[
            {
                "name": "analyst",
                "description": "Performs data analysis with real-time progress tracking",
                "system_prompt": (
                    "You are a data analyst. You MUST call the analyze_data tool "
                    "for every analysis request. Do not use any other tools. "
                    "After the analysis completes, report the result."
                ),
                "tools": [analyze_data],
            },
        ],
        name="main-agent",
    )
    return agent


# --------------------------------------------------------------------------- the streams


def subagent_progress(agent: Any) -> list[tuple[tuple[str, ...], str]]:
    """16.3: stream_mode="updates"; returns (namespace, node) for every update."""
    steps = []
    for chunk in agent.stream(
        {"messages": [{"role": "user", "content": "Write a short summary about AI safety"}]},
        stream_mode="updates",
        subgraphs=True,
        version="v2",
    ):
        if chunk["type"] == "updates":
            steps += [(chunk["ns"], node_name) for node_name in chunk["data"]]
            # Main agent updates (empty namespace)
            if not chunk["ns"]:
                for node_name, data in chunk["data"].items():
                    if node_name == "tools":
                        # Subagent results returned to main agent
                        for msg in data.get("messages", []):
                            if msg.type == "tool":
                                print(f"\nSubagent complete: {msg.name}")
                                print(f"  Result: {str(msg.content)[:200]}...")
                    else:
                        print(f"[main agent] step: {node_name}")

            # Subagent updates (non-empty namespace)
            else:
                for node_name, data in chunk["data"].items():  # noqa: B007
                    print(f"  [{chunk['ns'][0]}] step: {node_name}")
    return steps


def llm_tokens(agent: Any) -> dict[str, Any]:
    """16.4: stream_mode="messages"; returns the AI text and agent names per source."""
    text: dict[str, str] = {}
    agent_names: dict[str, set[str]] = {}
    current_source = ""

    for chunk in agent.stream(
        {"messages": [{"role": "user", "content": "Research quantum computing advances"}]},
        stream_mode="messages",
        subgraphs=True,
        version="v2",
    ):
        if chunk["type"] == "messages":
            token, metadata = chunk["data"]

            # Check if this event came from a subagent (namespace contains "tools:")
            is_subagent = any(s.startswith("tools:") for s in chunk["ns"])
            source = "subagent" if is_subagent else "main"
            agent_names.setdefault(source, set()).add(metadata.get("lc_agent_name"))
            if isinstance(token, AIMessage):
                text[source] = text.get(source, "") + token.text

            if is_subagent:
                # Token from a subagent
                subagent_ns = next(s for s in chunk["ns"] if s.startswith("tools:"))
                if subagent_ns != current_source:
                    print(f"\n\n--- [subagent: {subagent_ns}] ---")
                    current_source = subagent_ns
                if token.content:
                    print(token.content, end="", flush=True)
            else:
                # Token from the main agent
                if current_source != "main":
                    print("\n\n--- [main agent] ---")
                    current_source = "main"
                if token.content:
                    print(token.content, end="", flush=True)

    print()
    for source, names in agent_names.items():
        print(f"lc_agent_name of {source} tokens: {sorted(names)}")
    return {"text": text, "agent_names": agent_names}


def custom_updates(agent: Any) -> list[tuple[tuple[str, ...], dict[str, Any]]]:
    """16.6: stream_mode="custom"; returns (namespace, event) for every custom event."""
    events = []
    for chunk in agent.stream(
        {"messages": [{"role": "user", "content": "Analyze customer satisfaction trends"}]},
        stream_mode="custom",
        subgraphs=True,
        version="v2",
    ):
        if chunk["type"] == "custom":
            events.append((chunk["ns"], chunk["data"]))
            is_subagent = any(s.startswith("tools:") for s in chunk["ns"])
            if is_subagent:
                subagent_ns = next(s for s in chunk["ns"] if s.startswith("tools:"))
                print(f"[{subagent_ns}]", chunk["data"])
            else:
                print("[main]", chunk["data"])
    return events


# Skip internal middleware steps - only show meaningful node names
INTERESTING_NODES = {"model", "tools"}  # the tutorial: {"model_request", "tools"}


def multiple_modes(agent: Any) -> list[tuple[str, str, Any]]:
    """16.7: updates, messages and custom in one stream; returns (type, source, what)."""
    seen = []
    last_source = ""
    mid_line = False  # True when we've written tokens without a trailing newline

    for chunk in agent.stream(
        {
            "messages": [
                {
                    "role": "user",
                    "content": "Analyze the impact of remote work on team productivity",
                }
            ]
        },
        stream_mode=["updates", "messages", "custom"],
        subgraphs=True,
        version="v2",
    ):
        is_subagent = any(s.startswith("tools:") for s in chunk["ns"])
        source = "subagent" if is_subagent else "main"

        if chunk["type"] == "updates":
            for node_name in chunk["data"]:
                if node_name not in INTERESTING_NODES:
                    continue
                if mid_line:
                    print()
                    mid_line = False
                print(f"[{source}] step: {node_name}")
                seen.append(("updates", source, node_name))

        elif chunk["type"] == "messages":
            token, metadata = chunk["data"]  # noqa: RUF059
            if token.content:
                # Print a header when the source changes
                if source != last_source:
                    if mid_line:
                        print()
                        mid_line = False
                    print(f"\n[{source}] ", end="")
                    last_source = source
                print(token.content, end="", flush=True)
                mid_line = True
                seen.append(("messages", source, token.content))

        elif chunk["type"] == "custom":
            if mid_line:
                print()
                mid_line = False
            print(f"[{source}] custom event:", chunk["data"])
            seen.append(("custom", source, chunk["data"]))

    print()
    return seen


def main() -> dict[str, Any]:
    """Run the four streams; return what each one yielded, by namespace."""
    print("=== 16.3 subagent progress (stream_mode='updates') ===")
    progress = subagent_progress(research_agent())
    print("\n=== 16.4 LLM tokens (stream_mode='messages') ===", end="")
    tokens = llm_tokens(research_agent())
    print("\n=== 16.6 custom updates (stream_mode='custom') ===")
    custom = custom_updates(analyst_agent())
    print("\n=== 16.7 several modes at once ===")
    multi = multiple_modes(analyst_agent())
    return {"updates": progress, "messages": tokens, "custom": custom, "multi": multi}


if __name__ == "__main__":
    main()
