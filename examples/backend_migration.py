"""Migrating namespace factories from `BackendContext` (`ctx.runtime...`) to the `Runtime`.

Deep Agents tutorial, section 7.8 (从后端工厂迁移 / migrating from backend factories):
namespace factories now receive the LangGraph `Runtime`. The old `BackendContext` form still
works through the `.runtime` / `.state` accessors, which emit deprecation warnings. The
tutorial's "before" is `lambda ctx: (ctx.runtime.context.user_id,)` and its "after" is
`lambda rt: (rt.server_info.user.identity,)`.

Ported to fathom: only the import changes (`deepagents.backends` → `fathom.backends`); the
hosted model becomes a `ScriptedModel`. Three agents share one `InMemoryStore` and run for
user "alice":

- before: works, files land under `("alice",)`, and a `DeprecationWarning` is emitted.
- `lambda rt: (rt.context.user_id,)`, the literal equivalent of "before": same namespace (it
  reads the file "before" wrote), no warning.
- after: `rt.server_info` is filled in by LangGraph Server with the authenticated user;
  running locally it is `None`, so the factory fails and the model gets that error. The
  "after" is a change of meaning too: the server's user, not the `user_id` in the context.

Run: `.venv/bin/python examples/backend_migration.py`
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from fathom import create_deep_agent
from fathom.backends import StoreBackend
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

NOTE_PATH = "/notes.md"


@dataclass
class Context:
    user_id: str


def note_policy(request: ScriptRequest) -> AIMessage:
    """Write the note when asked to; otherwise read it. Report what the tool said."""
    results = request.tool_results
    if results:
        return ai(f"{results[-1].name}: {results[-1].content}")
    text = request.last_human_text
    if text.startswith("Write:"):
        content = text.removeprefix("Write:").strip()
        return ai("", tool_call("write_file", {"file_path": NOTE_PATH, "content": content}))
    return ai("", tool_call("read_file", {"file_path": NOTE_PATH}))


def model() -> ScriptedModel:
    return ScriptedModel(policy=note_policy)  # was: "google_genai:gemini-3.1-pro-preview"


def main() -> dict[str, Any]:
    from langgraph.store.memory import InMemoryStore

    store = InMemoryStore()
    factories = {
        # Before (deprecated, removed in v0.7)
        "before": StoreBackend(
            namespace=lambda ctx: (ctx.runtime.context.user_id,),
        ),
        # The literal equivalent of "before" on the Runtime
        "rt.context": StoreBackend(
            namespace=lambda rt: (rt.context.user_id,),
        ),
        # After
        "after": StoreBackend(
            namespace=lambda rt: (rt.server_info.user.identity,),
        ),
    }
    requests = {"before": "Write: call the bank", "rt.context": "Read it", "after": "Read it"}
    outcome: dict[str, Any] = {}
    for name, backend in factories.items():
        agent = create_deep_agent(
            model=model(), backend=backend, store=store, context_schema=Context
        )
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            state = agent.invoke(
                {"messages": [{"role": "user", "content": requests[name]}]},
                context=Context(user_id="alice"),
            )
        deprecations = sorted(
            {str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)}
        )
        result = next(m for m in state["messages"] if isinstance(m, ToolMessage))
        status = "error" if result.status == "error" else "ok"
        print(f"{name}:")
        print(f"  {result.name} -> {status}: {str(result.content).replace(chr(9), ' ').strip()}")
        print(f"  deprecation warnings: {len(deprecations)}")
        for message in deprecations:
            print(f"    DeprecationWarning: {message}")
        outcome[name] = {"result": result, "deprecations": deprecations}
    namespaces = sorted({tuple(item.namespace) for item in store.search(())})
    print(f"store namespaces: {namespaces}")
    outcome["namespaces"] = namespaces
    return outcome


if __name__ == "__main__":
    main()
