"""Memory: `AGENTS.md` files give the agent extra context, loaded into its system prompt.

Deep Agents tutorial, section 3.8 (记忆 / memory): `memory=[...]` with the file in a
`FilesystemBackend` (`memory=["./AGENTS.md"]`, with `interrupt_on` and a checkpointer) and
in a `StoreBackend` (`store.put(namespace=("filesystem",), key="/AGENTS.md", ...)`,
`memory=["/AGENTS.md"]`). The tutorial labels its first block "statebackend" but shows the
`FilesystemBackend` code (its third block repeats it); this example runs that code once and
adds the in-state case the label promises: `files={"/AGENTS.md": create_file_data(...)}`
given to `invoke`, as the tutorial's store example also does.

Ported to fathom: only the imports change (`deepagents` → `fathom`, `deepagents.backends` →
`fathom.backends`); the hosted model becomes a `ScriptedModel` that answers "what's in your
memory files" from its system prompt and edits memory when told a new rule. The tutorial
downloads `examples/text-to-sql-agent/AGENTS.md` with `urlopen`; here `AGENTS_MD` is a short
local stand-in (not the original text), so nothing goes to the network.
`root_dir="/Users/user/{project}"` becomes a temporary directory.

What it shows:

- StateBackend: the file in the thread's state is in the first request's system prompt; a
  thread without it shows the file as "not created yet".
- StoreBackend: the file is read from the store (the copy in `files` is not what is loaded).
- FilesystemBackend: `./AGENTS.md` is `<root_dir>/AGENTS.md`. The model edits it with
  `edit_file`, which pauses for approval (`interrupt_on`); once approved the file on disk
  changes, and the next run's prompt has the new rule.

Run: `.venv/bin/python examples/memory_agents_md.py`
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.types import Command

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

# Stand-in for https://raw.githubusercontent.com/langchain-ai/deepagents/refs/heads/main/
# examples/text-to-sql-agent/AGENTS.md (not downloaded; not the original text).
AGENTS_MD = """# Text-to-SQL Agent

You answer questions about the Chinook music store database by writing SQL.

## Rules
- Only run read-only queries (SELECT); never INSERT, UPDATE, DELETE or DROP.
- Look at the table schemas before you write a query.
- Limit results to 5 rows unless the user asks for more.
"""

MEMORY_FILE = re.compile(r'<memory_file path="([^"]+)">\n(.*?)\n</memory_file>', re.S)
NEW_LIMIT = re.compile(r"limit results to (\d+) rows", re.I)


def memory_files(request: ScriptRequest) -> dict[str, str]:
    """The memory files as the system prompt shows them: path → text (or note)."""
    return dict(MEMORY_FILE.findall(request.system_prompt or ""))


def memory_policy(request: ScriptRequest) -> AIMessage:
    """Describe the memory files, or record a new row limit in the one that has the rule."""
    files = memory_files(request)
    results = request.tool_results
    if results:
        return ai(f"Updated my memory: {results[-1].content}")
    wanted = NEW_LIMIT.search(request.last_human_text)
    if wanted:
        for path, text in files.items():
            old = NEW_LIMIT.search(text)
            if old:
                new_rule = f"Limit results to {wanted.group(1)} rows"
                return ai(
                    "",
                    tool_call(
                        "edit_file",
                        {"file_path": path, "old_string": old.group(0), "new_string": new_rule},
                    ),
                )
        return ai("I have no memory file with a row limit to update.")
    lines = ["My memory files:"]
    for path, text in files.items():
        first = text.splitlines()[0] if text else ""
        rule = NEW_LIMIT.search(text)
        detail = f"{first}; {rule.group(0)}" if rule else first
        lines.append(f"- {path}: {detail}")
    return ai("\n".join(lines) if files else "I have no memory files.")


def model() -> ScriptedModel:
    return ScriptedModel(policy=memory_policy)  # was: "google_genai:gemini-3.1-pro-preview"


QUESTION = "Please tell me what's in your memory files."


def ask(agent: Any, text: str, config: dict[str, Any], **extra: Any) -> dict[str, Any]:
    result = agent.invoke({"messages": [{"role": "user", "content": text}], **extra}, config)
    show(text, result)
    return result


def show(text: str, result: dict[str, Any]) -> None:
    """Print a question and the agent's answer."""
    print(f"  > {text}")
    for line in str(result["messages"][-1].content).splitlines():
        print(f"    {line}")


def state_backend() -> dict[str, Any]:
    """The file in the thread's state (the default `StateBackend`)."""
    from langgraph.checkpoint.memory import MemorySaver

    from fathom.backends.utils import create_file_data

    print("StateBackend (files passed to invoke):")
    agent = create_deep_agent(
        model=model(),  # was: "google_genai:gemini-3.1-pro-preview"
        memory=["/AGENTS.md"],
        checkpointer=MemorySaver(),
    )
    with_file = ask(
        agent,
        QUESTION,
        {"configurable": {"thread_id": "12345"}},
        files={"/AGENTS.md": create_file_data(AGENTS_MD)},
    )
    without = ask(agent, QUESTION, {"configurable": {"thread_id": "another-thread"}})
    return {"with_file": with_file, "without": without}


def store_backend() -> dict[str, Any]:
    """The tutorial's StoreBackend block, with the local AGENTS_MD instead of urlopen."""
    from langgraph.store.memory import InMemoryStore

    from fathom import create_deep_agent
    from fathom.backends import StoreBackend
    from fathom.backends.utils import create_file_data

    agents_md = AGENTS_MD  # was: urlopen(".../examples/text-to-sql-agent/AGENTS.md")

    # Create the store and add the file to it
    store = InMemoryStore()
    file_data = create_file_data(agents_md)
    store.put(
        namespace=("filesystem",),
        key="/AGENTS.md",
        value=file_data
    )

    llm = model()
    agent = create_deep_agent(
        model=llm,  # was: "google_genai:gemini-3.1-pro-preview"
        backend=StoreBackend(),
        store=store,
        memory=[
            "/AGENTS.md"
        ]
    )

    print("StoreBackend (file in the store):")
    result = agent.invoke(
        {
            "messages": [
                {
                    "role": "user",
                    "content": "Please tell me what's in your memory files.",
                }
            ],
            "files": {"/AGENTS.md": create_file_data(agents_md)},
        },
        config={"configurable": {"thread_id": "12345"}},
    )
    show(QUESTION, result)
    stored = [item.key for item in store.search(("filesystem",))]
    print(f"  in the store: {stored}; in the thread's state: {sorted(result['files'])}")
    return {"result": result, "prompt": llm.requests[-1].system_prompt, "stored": stored}


def filesystem_backend(root: str) -> dict[str, Any]:
    """The tutorial's FilesystemBackend block: `./AGENTS.md` under root_dir, edits approved."""
    from langgraph.checkpoint.memory import MemorySaver

    from fathom import create_deep_agent
    from fathom.backends import FilesystemBackend

    Path(root, "AGENTS.md").write_text(AGENTS_MD, encoding="utf-8")

    # Checkpointer is REQUIRED for human-in-the-loop
    checkpointer = MemorySaver()

    agent = create_deep_agent(
        model=model(),  # was: "google_genai:gemini-3.1-pro-preview"
        # was: root_dir="/Users/user/{project}"; unconfined by name, as the tutorial's paths
        backend=FilesystemBackend(root_dir=root, virtual_mode=False),
        memory=[
            "./AGENTS.md"
        ],
        interrupt_on={
            "write_file": True,  # Default: approve, edit, reject
            "read_file": False,  # No interrupts needed
            "edit_file": True    # Default: approve, edit, reject
        },
        checkpointer=checkpointer,  # Required!
    )

    print("FilesystemBackend (./AGENTS.md under root_dir):")
    config = {"configurable": {"thread_id": "project"}}
    before = ask(agent, QUESTION, config)
    text = "From now on, limit results to 10 rows."
    paused = agent.invoke(
        {"messages": [{"role": "user", "content": text}]}, config, version="v2"
    )
    (request,) = paused.interrupts[0].value["action_requests"]
    print(f"  > {text}\n  paused for approval: {request['name']}({request['args']})")
    resumed = agent.invoke(
        Command(resume={"decisions": [{"type": "approve"}]}), config, version="v2"
    )
    print(f"  approved -> {resumed.value['messages'][-1].content}")
    on_disk = Path(root, "AGENTS.md").read_text(encoding="utf-8")
    print(f"  on disk now: {NEW_LIMIT.search(on_disk).group(0)!r}")  # type: ignore[union-attr]
    after = ask(agent, QUESTION, config)
    return {"before": before, "request": request, "after": after, "on_disk": on_disk}


def main(root: str | None = None) -> dict[str, Any]:
    outcome: dict[str, Any] = {"state": state_backend(), "store": store_backend()}
    with tempfile.TemporaryDirectory() as tmp:
        outcome["filesystem"] = filesystem_backend(root or tmp)
    return outcome


if __name__ == "__main__":
    main()
