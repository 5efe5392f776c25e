"""`StoreBackend`: files in a LangGraph store, shared across threads, scoped by namespace.

Deep Agents tutorial, section 7.2.4 (StoreBackend, LangGraph store): the tutorial's
`StoreBackend(namespace=lambda ctx: (ctx.runtime.context.user_id,))` with
`store=InMemoryStore()`, then its "common namespace patterns" (per user, per assistant,
per thread).

Ported to fathom: only the imports change (`deepagents` → `fathom`, `deepagents.backends` →
`fathom.backends`); the hosted model becomes a `ScriptedModel` that saves a preference with
`write_file` and reads it back with `read_file`. A `context_schema` dataclass with `user_id`
is added so that `ctx.runtime.context.user_id` has something to read. What happens:

- The tutorial's factory uses the older `BackendContext` form (`ctx.runtime...`). It still
  works (files land under `("alice",)`) and emits a `DeprecationWarning`, printed here. A
  file written on thread 1 is read on thread 2 by the same user; another user does not see it.
- Per thread (`rt.execution_info.thread_id`) runs for real: two threads, two namespaces.
- Per user (`rt.server_info.user.identity`) and per assistant (`rt.server_info.assistant_id`)
  need LangGraph Server: locally `rt.server_info` is `None`, so the factory fails and the
  model gets that as the tool's error (printed), and nothing is stored.

Run: `.venv/bin/python examples/store_backend.py`
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

PREFS_PATH = "/preferences.md"


@dataclass
class Context:
    user_id: str


def prefs_policy(request: ScriptRequest) -> AIMessage:
    """Save what the user asks to remember; read it back when asked."""
    results = request.tool_results
    if results:
        result = results[-1]
        if result.status == "error":
            return ai(f"That did not work: {result.content}")
        if result.name == "write_file":
            return ai(f"Saved to {PREFS_PATH}.")
        return ai("You prefer: " + str(result.content).split("\t", 1)[-1])
    text = request.last_human_text
    if text.startswith("Remember:"):
        content = text.removeprefix("Remember:").strip()
        return ai("", tool_call("write_file", {"file_path": PREFS_PATH, "content": content}))
    return ai("", tool_call("read_file", {"file_path": PREFS_PATH}))


def model() -> ScriptedModel:
    return ScriptedModel(policy=prefs_policy)  # was: "google_genai:gemini-3.1-pro-preview"


def ask(agent: Any, thread_id: str, text: str, context: Context | None = None) -> dict:
    """One turn on `thread_id`; print the answer and return the final state."""
    config = {"configurable": {"thread_id": thread_id}}
    message = {"messages": [{"role": "user", "content": text}]}
    state = agent.invoke(message, config, context=context)
    who = f" ({context.user_id})" if context else ""
    print(f"  thread {thread_id}{who}: {text!r} -> {state['messages'][-1].content!r}")
    return state


def tool_result(state: dict) -> ToolMessage:
    """The (one) tool result of a turn."""
    return next(m for m in state["messages"] if isinstance(m, ToolMessage))


def main() -> dict[str, Any]:
    from langgraph.store.memory import InMemoryStore

    from fathom.backends import StoreBackend

    print("tutorial form, namespace=lambda ctx: (ctx.runtime.context.user_id,):")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        agent = create_deep_agent(
            model=model(),  # was: "google_genai:gemini-3.1-pro-preview"
            backend=StoreBackend(
                namespace=lambda ctx: (ctx.runtime.context.user_id,),
            ),
            store=InMemoryStore(),  # Good for local dev; omit for LangSmith Deployment
            context_schema=Context,
        )
        turns = [
            ask(agent, "1", "Remember: green tea, no sugar", Context(user_id="alice")),
            ask(agent, "2", "What do I prefer?", Context(user_id="alice")),
            ask(agent, "3", "What do I prefer?", Context(user_id="bob")),
        ]
    answers = [state["messages"][-1].content for state in turns]
    deprecations = sorted(
        {str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)}
    )
    for message in deprecations:
        print(f"  DeprecationWarning: {message}")
    stored = {(tuple(i.namespace), i.key): i.value["content"] for i in agent.store.search(())}
    print(f"  in the store: {sorted(stored)}")

    # Common namespace patterns: each backend gets its own agent over one shared store.
    store = InMemoryStore()

    def agent_for(backend: StoreBackend) -> Any:
        return create_deep_agent(model=model(), backend=backend, store=store)

    # Per-user: each user gets their own isolated storage
    per_user = StoreBackend(
        namespace=lambda rt: (rt.server_info.user.identity,),
    )

    # Per-assistant: all users of the same assistant share storage
    per_assistant = StoreBackend(
        namespace=lambda rt: (
            rt.server_info.assistant_id,
        ),
    )

    # Per-thread: storage scoped to a single conversation
    per_thread = StoreBackend(
        namespace=lambda rt: (
            rt.execution_info.thread_id,
        ),
    )

    print("per-thread, namespace=lambda rt: (rt.execution_info.thread_id,):")
    thread_agent = agent_for(per_thread)
    ask(thread_agent, "thread-a", "Remember: espresso")
    ask(thread_agent, "thread-b", "Remember: rooibos")
    ask(thread_agent, "thread-a", "What do I prefer?")
    thread_namespaces = sorted({tuple(item.namespace) for item in store.search(())})
    print(f"  store namespaces: {thread_namespaces}")

    server_errors = {}
    for name, backend in [("per-user", per_user), ("per-assistant", per_assistant)]:
        print(f"{name} (needs LangGraph Server's rt.server_info; locally it is None):")
        result = tool_result(ask(agent_for(backend), name, "Remember: mate"))
        server_errors[name] = str(result.content) if result.status == "error" else ""
    after = sorted({tuple(item.namespace) for item in store.search(())})
    print(f"  store namespaces afterwards: {after}")
    return {
        "answers": answers,
        "deprecations": deprecations,
        "user_store": stored,
        "thread_namespaces": thread_namespaces,
        "thread_store": {(tuple(i.namespace), i.key): i.value for i in store.search(())},
        "server_errors": server_errors,
    }


if __name__ == "__main__":
    main()
