"""Filesystem permissions: ordered allow/deny rules checked before the backend is called.

Deep Agents tutorial, section 7.6 (权限 / permissions) and section 11.3 (examples of rule
sets). Rules are checked in order, the first match decides, and no match allows. `"read"`
covers `ls`, `read_file`, `glob`, `grep`; `"write"` covers `write_file`, `edit_file`.

- 7.6: a composite with `/memories/` (per user) and `/policies/` (per organisation, from
  `rt.context.org_id`) and `FilesystemPermission(operations=["write"], paths=["/policies/**"],
  mode="deny")`. The agent reads a policy that the application put into the store, but its
  write and edit under `/policies/` are refused. Running locally needs two additions the
  tutorial leaves to the platform: `store=InMemoryStore()` and a `context_schema` carrying
  `org_id`. `/memories/` is keyed by `rt.server_info.user.identity`, which only LangGraph
  Server provides, so locally a write there fails with the namespace factory's error.
- 11.3: workspace isolation, protecting `.env` and `examples/**`, read-only, deny all, and
  the rule-order bug (a broad allow placed first means the `.env` deny is never reached),
  each over the default `StateBackend` with the same five operations.

Ported to fathom: only the imports change (`deepagents` → `fathom`, `deepagents.backends` →
`fathom.backends`); the hosted model becomes a `ScriptedModel` that tries each operation once
and does not retry a refused one.

Run: `.venv/bin/python examples/permissions.py`
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolCall, ToolMessage

from fathom import FilesystemPermission, create_deep_agent
from fathom.backends import CompositeBackend, StateBackend, StoreBackend, create_file_data
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

POLICY = "Expenses over 500 EUR need a second approval.\n"


@dataclass
class Context:
    org_id: str


def read(path: str) -> ToolCall:
    return tool_call("read_file", {"file_path": path})


def write(path: str, content: str) -> ToolCall:
    return tool_call("write_file", {"file_path": path, "content": content})


def edit(path: str, old: str, new: str) -> ToolCall:
    return tool_call("edit_file", {"file_path": path, "old_string": old, "new_string": new})


POLICY_STEPS = [
    read("/policies/expenses.md"),
    write("/policies/expenses-v2.md", "Expenses over 5000 EUR need a second approval.\n"),
    edit("/policies/expenses.md", "500 EUR", "5000 EUR"),
    write("/workspace/summary.md", "Policy read: second approval above 500 EUR.\n"),
    write("/memories/notes.md", "The user asked about expenses.\n"),
]

WORKSPACE = {
    "/workspace/main.py": 'print("hello")\n',
    "/workspace/.env": "API_KEY=sk-not-a-real-key\n",
    "/workspace/examples/demo.py": "DEMO = 1\n",
    "/secrets/token.txt": "token-123\n",
}

WORKSPACE_STEPS = [
    read("/workspace/main.py"),
    write("/workspace/notes.md", "notes\n"),
    read("/workspace/.env"),
    edit("/workspace/examples/demo.py", "DEMO = 1", "DEMO = 2"),
    read("/secrets/token.txt"),
]

PLANS = {"Check the expenses policy.": POLICY_STEPS, "Work on the project.": WORKSPACE_STEPS}


def turn_results(messages: list[Any]) -> list[ToolMessage]:
    """The tool results since the last user message."""
    results: list[ToolMessage] = []
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            break
        if isinstance(message, ToolMessage):
            results.append(message)
    return results[::-1]


def plan_policy(request: ScriptRequest) -> AIMessage:
    """Try each operation once, one after another; then say how many were refused."""
    plan = PLANS[request.last_human_text]
    done = turn_results(request.messages)
    if len(done) < len(plan):
        return ai("", plan[len(done)])
    denied = sum("permission denied" in str(m.content) for m in done)
    return ai(f"{len(done) - denied} operations went through, {denied} were not allowed.")


def model() -> ScriptedModel:
    return ScriptedModel(policy=plan_policy)  # was: "google_genai:gemini-3.1-pro-preview"


def outcomes(state: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(tool, path, "allowed" | "denied" | "error: ...") for each tool call, printed."""
    rows = []
    calls = [c for m in state["messages"] if isinstance(m, AIMessage) for c in m.tool_calls]
    for call, result in zip(calls, turn_results(state["messages"]), strict=True):
        if "permission denied" in str(result.content):
            verdict = "denied"
        elif result.status == "error":
            verdict = f"error: {result.content}"
        else:
            verdict = "allowed"
        path = call["args"]["file_path"]
        print(f"  {call['name']:<10} {path:<30} {verdict}")
        rows.append((call["name"], path, verdict))
    return rows


def read_only_policies() -> dict[str, Any]:
    """7.6: reading /policies/ is allowed, writing there is denied."""
    from langgraph.store.memory import InMemoryStore

    store = InMemoryStore()
    # The application (not the agent) maintains the policies of organisation "acme".
    store.put(("acme",), "/expenses.md", dict(create_file_data(POLICY)))

    agent = create_deep_agent(
        model=model(),  # was: "google_genai:gemini-3.1-pro-preview"
        backend=CompositeBackend(
            default=StateBackend(),
            routes={
                "/memories/": StoreBackend(
                    namespace=lambda rt: (rt.server_info.user.identity,),
                ),
                "/policies/": StoreBackend(
                    namespace=lambda rt: (rt.context.org_id,),
                ),
            },
        ),
        permissions=[
            FilesystemPermission(
                operations=["write"],
                paths=["/policies/**"],
                mode="deny",
            ),
        ],
        store=store,  # added: locally there is no platform store
        context_schema=Context,  # added: carries org_id
    )
    message = {"messages": [{"role": "user", "content": "Check the expenses policy."}]}
    state = agent.invoke(message, context=Context(org_id="acme"))
    rows = outcomes(state)
    refusal = next(m for m in turn_results(state["messages"]) if "permission denied" in m.content)
    print(f"  the model was told: {refusal.content}")
    stored = {(tuple(i.namespace), i.key): i.value["content"] for i in store.search(())}
    print(f"  in the store afterwards: {stored}")
    return {"state": state, "rows": rows, "stored": stored}


RULE_SETS: dict[str, list[FilesystemPermission]] = {
    # Only allow reads and writes under /workspace/, deny everything else
    "workspace isolation": [
        FilesystemPermission(
            operations=["read", "write"],
            paths=["/workspace/**"],
            mode="allow",
        ),
        FilesystemPermission(
            operations=["read", "write"],
            paths=["/**"],
            mode="deny",
        ),
    ],
    # Protect specific files
    "protect .env and examples/": [
        FilesystemPermission(
            operations=["read", "write"],
            paths=["/workspace/.env", "/workspace/examples/**"],
            mode="deny",
        ),
        FilesystemPermission(
            operations=["read", "write"],
            paths=["/workspace/**"],
            mode="allow",
        ),
        FilesystemPermission(
            operations=["read", "write"],
            paths=["/**"],
            mode="deny",
        ),
    ],
    # Read-only agent: deny all writes
    "read-only": [
        FilesystemPermission(
            operations=["write"],
            paths=["/**"],
            mode="deny",
        ),
    ],
    # Deny all access
    "deny all": [
        FilesystemPermission(
            operations=["read", "write"],
            paths=["/**"],
            mode="deny",
        ),
    ],
    # Correct: deny .env, allow workspace, deny everything else
    "rule order, correct": [
        FilesystemPermission(
            operations=["read", "write"],
            paths=["/workspace/.env"],
            mode="deny",
        ),
        FilesystemPermission(
            operations=["read", "write"],
            paths=["/workspace/**"],
            mode="allow",
        ),
        FilesystemPermission(
            operations=["read", "write"],
            paths=["/**"],
            mode="deny",
        ),
    ],
    # Bug: /workspace/** matches .env first, so the deny never triggers
    "rule order, bug": [
        FilesystemPermission(
            operations=["read", "write"],
            paths=["/workspace/**"],
            mode="allow",
        ),
        FilesystemPermission(
            operations=["read", "write"],
            paths=["/workspace/.env"],
            mode="deny",  # never reached
        ),
        FilesystemPermission(
            operations=["read", "write"],
            paths=["/**"],
            mode="deny",
        ),
    ],
}


def rule_sets() -> dict[str, dict[str, Any]]:
    """11.3: the same five operations under each rule set, over the default StateBackend."""
    backend = StateBackend()
    workspace = {path: create_file_data(content) for path, content in WORKSPACE.items()}
    results = {}
    for name, permissions in RULE_SETS.items():
        print(f"{name}:")
        agent = create_deep_agent(
            model=model(),
            backend=backend,
            permissions=permissions,
        )
        message = {"role": "user", "content": "Work on the project."}
        state = agent.invoke({"messages": [message], "files": dict(workspace)})
        results[name] = {"state": state, "rows": outcomes(state)}
    return results


def main() -> dict[str, Any]:
    print("7.6 read-only /policies/:")
    return {"policies": read_only_policies(), "rule_sets": rule_sets()}


if __name__ == "__main__":
    main()
