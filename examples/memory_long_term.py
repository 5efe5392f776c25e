"""Long-term memory: a `/memories/` route to the LangGraph store, shared across threads.

Deep Agents tutorial, section 6.9 (长期记忆 / long-term memory): `make_backend(runtime)`
returns `CompositeBackend(default=StateBackend(runtime), routes={"/memories/":
StoreBackend(runtime)})`, the agent gets `store=InMemoryStore()`, `backend=make_backend` and
a system prompt telling it to save preferences to `/memories/user_preferences.txt`. Nothing
is pre-populated: the agent creates the file with `write_file` when the user shares a
preference. The same backend with `memory=["/memories/user_preferences.txt"]` (section 12)
loads the file into the system prompt of every run, so the agent no longer has to read it.

Ported to fathom: only the imports change (`deepagents` → `fathom`, `deepagents.backends` →
`fathom.backends`); the hosted model becomes a `ScriptedModel` that saves preferences where
the system prompt says, reads them back with `read_file` when they are not in its prompt,
and answers from its prompt when they are.

What happens:

1. Tutorial agent: thread 1 saves the preference; thread 2 (a new conversation) finds it
   with `read_file` in the store.
2. With `memory=`: the file is shown as "not created yet" in thread 3's prompt; the agent
   creates it; thread 4's first request already has it in the system prompt, and the agent
   answers without any tool call. An update with `edit_file` in thread 4 is in thread 5's
   prompt.

Run: `.venv/bin/python examples/memory_long_term.py`
"""

from __future__ import annotations

import re
from typing import Any

from langchain_core.messages import AIMessage

from fathom import create_deep_agent
from fathom.backends import CompositeBackend, StateBackend, StoreBackend
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

PREFS = "/memories/user_preferences.txt"
MEMORY_FILE = re.compile(r'<memory_file path="([^"]+)">\n(.*?)\n</memory_file>', re.S)


def memory_files(request: ScriptRequest) -> dict[str, str]:
    """The memory files as the system prompt shows them: path → text (or a note)."""
    return dict(MEMORY_FILE.findall(request.system_prompt or ""))


def preferences_policy(request: ScriptRequest) -> AIMessage:
    """Save preferences to PREFS; answer from memory, or read PREFS when not in memory."""
    in_prompt = memory_files(request).get(PREFS)
    results = request.tool_results
    if results:
        result = results[-1]
        if result.name == "read_file":
            lines = [line.split("\t", 1)[-1].strip() for line in result.text.splitlines()]
            return ai("Your preferences (read from the file): " + "; ".join(lines))
        return ai(f"I'll remember that. ({result.content})")
    text = request.last_human_text
    if text.startswith("I prefer"):
        preference = text.removeprefix("I prefer").strip().rstrip(".")
        if in_prompt is None or in_prompt.startswith("("):
            return ai("", tool_call("write_file", {"file_path": PREFS, "content": preference}))
        return ai(
            "",
            tool_call(
                "edit_file",
                {"file_path": PREFS, "old_string": in_prompt, "new_string": preference},
            ),
        )
    if in_prompt is not None and not in_prompt.startswith("("):
        return ai(f"Your preferences (from memory): {in_prompt}")
    return ai("", tool_call("read_file", {"file_path": PREFS}))


def ask(agent: Any, model: ScriptedModel, thread_id: str, text: str) -> dict[str, Any]:
    """One turn on a new thread; print the answer and the tools the agent used."""
    before = len(model.requests)
    result = agent.invoke(
        {"messages": [{"role": "user", "content": text}]},
        config={"configurable": {"thread_id": thread_id}},
    )
    tools = [c["name"] for r in model.requests[before:] for c in r.response.tool_calls]
    print(f"  [thread {thread_id}] {text!r} -> {result['messages'][-1].content}")
    print(f"      tools used: {tools or 'none'}")
    return result


def main() -> dict[str, Any]:
    from langgraph.store.memory import InMemoryStore

    def make_backend(runtime):
        return CompositeBackend(
            default=StateBackend(runtime),
            routes={"/memories/": StoreBackend(runtime)},
        )

    model = ScriptedModel(policy=preferences_policy)
    agent = create_deep_agent(
        model=model,  # was: "google_genai:gemini-3.1-pro-preview"
        store=InMemoryStore(),
        backend=make_backend,
        system_prompt="""When users tell you their preferences, save them to
    /memories/user_preferences.txt so you remember them in future conversations.""",
    )

    print("tutorial agent (system prompt + /memories/ route):")
    ask(agent, model, "1", "I prefer dark mode and metric units.")
    ask(agent, model, "2", "What are my preferences?")

    store = InMemoryStore()
    memory_model = ScriptedModel(policy=preferences_policy)
    memory_agent = create_deep_agent(
        model=memory_model,  # was: "google_genai:gemini-3.1-pro-preview"
        store=store,
        backend=make_backend,
        memory=["/memories/user_preferences.txt"],  # added: loaded into every run's prompt
        system_prompt="""When users tell you their preferences, save them to
    /memories/user_preferences.txt so you remember them in future conversations.""",
    )

    print('with memory=["/memories/user_preferences.txt"]:')
    ask(memory_agent, memory_model, "3", "I prefer dark mode and metric units.")
    first_prompt = memory_model.requests[0].system_prompt or ""
    answered = ask(memory_agent, memory_model, "4", "What are my preferences?")
    ask(memory_agent, memory_model, "4", "I prefer light mode and metric units.")
    ask(memory_agent, memory_model, "5", "What are my preferences?")
    stored = {i.key: i.value["content"] for i in store.search(("filesystem",))}
    print(f"  in the store: {stored}")
    return {
        "first_prompt": first_prompt,
        "answered": answered,
        "requests": memory_model.requests,
        "stored": stored,
    }


if __name__ == "__main__":
    main()
