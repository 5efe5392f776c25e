"""The default `StateBackend`, and the same agent with `backend=StateBackend()` spelled out.

Deep Agents tutorial, section 3.6 (后端 / Backends): by default a deep agent keeps its
virtual filesystem in a `StateBackend`, an ephemeral scratchpad stored in the current
thread's state. Files persist across turns of one thread and are not visible from other
threads. `create_deep_agent(model=...)` is the same as passing `backend=StateBackend()`.

Ported to fathom: only the imports change (`deepagents` → `fathom`,
`deepagents.backends` → `fathom.backends`); the hosted model becomes a `ScriptedModel` that
saves a note with `write_file` and reads it back with `read_file`. To show "persists within
a thread" both agents also get a checkpointer (`MemorySaver`) and are run on two threads:
two turns on thread "1", one turn on thread "2".

Run: `.venv/bin/python examples/default_backend.py`
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import MemorySaver

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

NOTE_PATH = "/notes/reminder.md"


def note_policy(request: ScriptRequest) -> AIMessage:
    """Save what the user asks to remember; read it back when asked."""
    results = request.tool_results
    if results:
        result = results[-1]
        if result.name == "write_file":
            return ai(f"Saved to {NOTE_PATH}.")
        if result.status == "error":
            return ai("I have no note in this conversation.")
        note = str(result.text).split("\t", 1)[-1]  # drop read_file's line number
        return ai(f"You asked me to remember: {note}")
    text = request.last_human_text
    if text.startswith("Remember:"):
        note = text.removeprefix("Remember:").strip()
        return ai("", tool_call("write_file", {"file_path": NOTE_PATH, "content": note}))
    return ai("", tool_call("read_file", {"file_path": NOTE_PATH}))


def model() -> ScriptedModel:
    return ScriptedModel(policy=note_policy)  # was: "google_genai:gemini-3.1-pro-preview"


def run(agent: Any) -> dict[str, Any]:
    """Two turns on thread "1", one on thread "2"; the answers and each thread's files."""
    turns = [
        ("1", "Remember: the deploy window is Friday 18:00 UTC."),
        ("1", "What did I ask you to remember?"),
        ("2", "What did I ask you to remember?"),
    ]
    answers = []
    for thread_id, text in turns:
        config = {"configurable": {"thread_id": thread_id}}
        result = agent.invoke({"messages": [{"role": "user", "content": text}]}, config)
        answers.append(result["messages"][-1].content)
        print(f"  thread {thread_id}: {text!r} -> {answers[-1]!r}")
    files = {
        thread_id: dict(
            agent.get_state({"configurable": {"thread_id": thread_id}}).values.get("files", {})
        )
        for thread_id in ("1", "2")
    }
    return {"answers": answers, "files": files}


def main() -> dict[str, Any]:
    """Run both agents the same way; return what each answered and stored."""
    # By default we provide a StateBackend
    agent = create_deep_agent(model=model(), checkpointer=MemorySaver())
    print("default backend:")
    default = run(agent)

    # Under the hood, it looks like
    from fathom.backends import StateBackend

    agent = create_deep_agent(
        model=model(),
        backend=StateBackend(),
        checkpointer=MemorySaver(),
    )
    print("backend=StateBackend():")
    explicit = run(agent)

    same = default["answers"] == explicit["answers"]
    print(f"same behaviour: {same}")
    return {"default": default, "explicit": explicit}


if __name__ == "__main__":
    main()
