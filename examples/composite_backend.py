"""`CompositeBackend`: one filesystem, routed by path prefix to different backends.

Deep Agents tutorial, section 7.2.4 (CompositeBackend, router) and section 7.4 (不同后端路由 /
routing to different backends):

- (a) `CompositeBackend(default=StateBackend(), routes={"/memories/": StoreBackend()})` with
  `store=InMemoryStore()` given to `create_deep_agent`: `/memories/...` lives in the store and
  is there on another thread; `/workspace/...` lives in the thread's state and is not.
- (b) `routes={"/memories/": FilesystemBackend(root_dir="/deepagents/myagent", virtual_mode=True)}`:
  `/workspace/plan.md` goes to state, `/memories/agent.md` becomes the file `agent.md` in the
  root directory; `ls` and `glob` show both with their full paths. With an extra
  `/memories/projects/` route the longer prefix wins.

Ported to fathom: only the imports change (`deepagents` → `fathom`, `deepagents.backends` →
`fathom.backends`); the hosted model becomes a `ScriptedModel` that carries out each request
with the file tools and reports what the tools answered. `root_dir="/deepagents/myagent"`
becomes `<temporary directory>/deepagents/myagent`, so the example writes nothing outside it.

Run: `.venv/bin/python examples/composite_backend.py`
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, ToolCall, ToolMessage

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call


def write(path: str, content: str) -> ToolCall:
    return tool_call("write_file", {"file_path": path, "content": content})


def read(path: str) -> ToolCall:
    return tool_call("read_file", {"file_path": path})


PLANS: dict[str, list[ToolCall]] = {
    "Save my profile and start a draft.": [
        write("/memories/profile.md", "Alice prefers short answers."),
        write("/workspace/draft.md", "Draft: quarterly summary"),
    ],
    "What do you know about me, and where is my draft?": [
        read("/memories/profile.md"),
        read("/workspace/draft.md"),
    ],
    "Plan the work and note what you learned.": [
        write("/workspace/plan.md", "1. Collect data\n2. Write summary"),
        write("/memories/agent.md", "The user likes numbered plans."),
        tool_call("ls", {"path": "/"}),
        tool_call("glob", {"pattern": "**/*.md"}),
    ],
    "File the project note and a general note.": [
        write("/memories/projects/fathom.md", "fathom: port the backend examples"),
        write("/memories/notes.md", "General note"),
        tool_call("ls", {"path": "/memories/"}),
        tool_call("glob", {"pattern": "**/*.md"}),
    ],
}


def plan_policy(request: ScriptRequest) -> AIMessage:
    """Make the calls the request needs, one after another, then report what they said."""
    plan = PLANS[request.last_human_text]
    done = request.turn_results
    if len(done) < len(plan):
        return ai("", plan[len(done)])
    return ai("\n".join(f"{m.name}: {m.content}" for m in done))


def model() -> ScriptedModel:
    return ScriptedModel(policy=plan_policy)  # was: "google_genai:gemini-3.1-pro-preview"


def ask(agent: Any, text: str, thread_id: str = "1") -> dict[str, Any]:
    """One turn; print each tool call with the first line of its result."""
    print(f"  [thread {thread_id}] {text}")
    config = {"configurable": {"thread_id": thread_id}}
    state = agent.invoke({"messages": [{"role": "user", "content": text}]}, config)
    messages = state["messages"]
    calls = {c["id"]: c for m in messages if isinstance(m, AIMessage) for c in m.tool_calls}
    for result in (m for m in messages if isinstance(m, ToolMessage)):
        call = calls[result.tool_call_id]
        args = call["args"]
        target = args.get("file_path") or args.get("pattern") or args["path"]
        shown = " | ".join(line.strip() for line in str(result.content).splitlines())
        print(f"    {call['name']}({target}) -> {shown.replace(chr(9), ' ')}")
    return state


def store_and_state() -> dict[str, Any]:
    """(a) `/memories/` in the store (every thread), everything else in the thread's state."""
    from langgraph.store.memory import InMemoryStore

    from fathom.backends import CompositeBackend, StateBackend, StoreBackend

    agent = create_deep_agent(
        model=model(),  # was: "google_genai:gemini-3.1-pro-preview"
        backend=CompositeBackend(
            default=StateBackend(),
            routes={
                "/memories/": StoreBackend(),
            }
        ),
        store=InMemoryStore()  # Store passed to create_deep_agent, not backend
    )
    first = ask(agent, "Save my profile and start a draft.", thread_id="1")
    second = ask(agent, "What do you know about me, and where is my draft?", thread_id="2")
    stored = {(tuple(i.namespace), i.key): i.value["content"] for i in agent.store.search(())}
    print(f"  in the store: {sorted(stored)}")
    print(f"  in thread 1's state: {sorted(first['files'])}")
    return {"first": first, "second": second, "stored": stored}


def state_and_disk(base: Path) -> dict[str, Any]:
    """(b) `/memories/` on local disk, everything else in state; longest prefix wins."""
    from fathom.backends import CompositeBackend, FilesystemBackend, StateBackend

    memory_dir = base / "deepagents" / "myagent"  # was: "/deepagents/myagent"
    projects_dir = base / "deepagents" / "projects"
    memory_dir.mkdir(parents=True)
    projects_dir.mkdir(parents=True)

    agent = create_deep_agent(
        model=model(),  # was: "google_genai:gemini-3.1-pro-preview"
        backend=CompositeBackend(
            default=StateBackend(),
            routes={
                "/memories/": FilesystemBackend(root_dir=memory_dir, virtual_mode=True),
            },
        )
    )
    routed = ask(agent, "Plan the work and note what you learned.")
    print(f"  in state: {sorted(routed['files'])}")
    print(f"  on disk: {sorted(str(p.relative_to(base)) for p in base.rglob('*.md'))}")

    print("  with an extra, longer route /memories/projects/:")
    agent = create_deep_agent(
        model=model(),
        backend=CompositeBackend(
            default=StateBackend(),
            routes={
                "/memories/": FilesystemBackend(root_dir=memory_dir, virtual_mode=True),
                "/memories/projects/": FilesystemBackend(root_dir=projects_dir, virtual_mode=True),
            },
        ),
    )
    longest = ask(agent, "File the project note and a general note.")
    on_disk = {
        p.relative_to(base).as_posix(): p.read_text(encoding="utf-8") for p in base.rglob("*.md")
    }
    print(f"  on disk: {sorted(on_disk)}")
    return {"routed": routed, "longest": longest, "on_disk": on_disk}


def main(workdir: str | None = None) -> dict[str, Any]:
    """Run (a), then (b) under `workdir` (a temporary directory by default)."""
    print("(a) default=StateBackend(), /memories/ -> StoreBackend():")
    outcome = store_and_state()
    print("(b) default=StateBackend(), /memories/ -> FilesystemBackend(...):")
    with tempfile.TemporaryDirectory() as scratch:
        outcome.update(state_and_disk(Path(workdir or scratch)))
    return outcome


if __name__ == "__main__":
    main()
