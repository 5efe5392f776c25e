"""`python -m fathom.demo`: a deep agent researching offline, step by step.

The model is a `ScriptedModel` that acts like a careful researcher, so the demo needs no
network and no API key, but everything around it is the real harness: the planning and
filesystem tools, a custom search tool, streaming, a checkpoint, and a human approval step
(approved here automatically, as a person would at the prompt).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

CORPUS = {
    "LangGraph": "LangGraph is a low-level runtime for stateful agents: graphs of nodes "
    "with durable checkpoints, interrupts for human review, and streaming.",
    "LangChain": "LangChain provides model integrations and the create_agent loop with "
    "middleware hooks around every model and tool call.",
    "Deep agents": "A deep agent plans with a todo list, keeps working notes in files, "
    "delegates to subagents and summarizes its context on long tasks.",
}


def search_notes(query: str, max_results: int = 3) -> list[dict[str, str]]:
    """Search the offline knowledge base for documents about a topic."""
    words = query.lower().split()
    hits = [
        {"title": title, "content": text}
        for title, text in CORPUS.items()
        if any(word in (title + " " + text).lower() for word in words)
    ]
    return hits[:max_results]


PLAN = ["Search the knowledge base", "Save notes to a file", "Write the report"]


def _todos(done: int) -> list[dict[str, str]]:
    return [
        {
            "content": item,
            "status": "completed" if i < done else "in_progress" if i == done else "pending",
        }
        for i, item in enumerate(PLAN)
    ]


def researcher(request: ScriptRequest) -> AIMessage:
    """The scripted researcher: one step per model call, decided by what it has seen."""
    steps = sum(1 for m in request.messages if isinstance(m, AIMessage))
    if steps == 0:
        return ai("I'll plan this first.", tool_call("write_todos", {"todos": _todos(0)}))
    if steps == 1:
        return ai("", tool_call("search_notes", {"query": "langgraph agents"}))
    if steps == 2:
        found = json.loads(request.last_message.content)
        notes = "\n".join(f"- {hit['title']}: {hit['content']}" for hit in found)
        return ai(
            "",
            tool_call("write_file", {"file_path": "/notes/sources.md", "content": notes}),
            tool_call("write_todos", {"todos": _todos(1)}),
        )
    if steps == 3:
        return ai("", tool_call("read_file", {"file_path": "/notes/sources.md"}))
    if steps == 4:
        report = (
            "# What a deep agent is\n\nA deep agent runs on LangGraph's durable runtime, uses "
            "LangChain's agent loop, plans with todos and keeps notes in files.\n"
        )
        return ai(
            "",
            tool_call("write_file", {"file_path": "/report.md", "content": report}),
            tool_call("write_todos", {"todos": _todos(3)}),
        )
    return ai(
        "The report is in /report.md: a deep agent runs on LangGraph's durable runtime, "
        "plans with a todo list and keeps its notes in files."
    )


def _is_report(request: Any) -> bool:
    """Only the final report needs a person's approval; notes do not."""
    return request.tool_call["args"].get("file_path") == "/report.md"


def _show(update: dict[str, Any], seen: set[str], out: Any) -> None:
    for change in update.values():
        if not isinstance(change, dict):
            continue
        for message in change.get("messages", []):
            if message.id in seen:
                continue
            seen.add(message.id)
            if isinstance(message, AIMessage):
                if message.text:
                    print(f"  model  › {message.text}", file=out)
                for call in message.tool_calls:
                    args = json.dumps(call["args"], ensure_ascii=False)
                    print(
                        f"  call   › {call['name']}({args[:90]}{'…' if len(args) > 90 else ''})",
                        file=out,
                    )
            elif isinstance(message, ToolMessage):
                first = str(message.content).splitlines()[0] if message.content else ""
                print(f"  result ‹ {message.name}: {first[:90]}", file=out)
        if change.get("todos"):
            marks = {"completed": "x", "in_progress": ">", "pending": " "}
            plan = "  ".join(f"[{marks[t['status']]}] {t['content']}" for t in change["todos"])
            print(f"  todos  : {plan}", file=out)


def main(out: Any = sys.stdout) -> dict[str, Any]:
    """Run the demo and return the final state."""
    model = ScriptedModel(policy=researcher)
    with tempfile.TemporaryDirectory() as tmp:
        saver = SqliteSaver.from_conn_string(str(Path(tmp) / "threads.db"))
        with saver as checkpointer:
            agent = create_deep_agent(
                model,
                tools=[search_notes],
                system_prompt="You are a careful researcher. Cite what you found.",
                interrupt_on={
                    "write_file": {"allowed_decisions": ["approve", "reject"], "when": _is_report}
                },
                checkpointer=checkpointer,
                name="researcher",
            )
            config = {"configurable": {"thread_id": "demo"}}
            request: Any = {"messages": [{"role": "user", "content": "What is a deep agent?"}]}
            print("fathom demo — an offline deep agent (scripted model)\n", file=out)
            seen: set[str] = set()
            while True:
                for update in agent.stream(request, config, stream_mode="updates"):
                    _show(update, seen, out)
                pending = agent.get_state(config).interrupts
                if not pending:
                    break
                actions = pending[0].value["action_requests"]
                for action in actions:
                    print(
                        f"  approve? {action['name']} {action['args'].get('file_path', '')}"
                        " → approved (demo)",
                        file=out,
                    )
                request = Command(resume={"decisions": [{"type": "approve"}] * len(actions)})
            state = agent.get_state(config).values
    print("\nfiles:", ", ".join(sorted(state["files"])), file=out)
    print(
        f"model calls: {model.calls}, input tokens: {sum(r.input_tokens for r in model.requests)}",
        file=out,
    )
    print("\nanswer:", state["messages"][-1].content, file=out)
    return state


if __name__ == "__main__":
    main()
