"""Organisation-level memory: shared policies the agent reads but may not change.

Deep Agents tutorial, section 12.3.2 (组织级记忆 / organisation-level memory) with 12.3.4
(只读记忆与可写记忆 / read-only vs writable memory): `memory=["/memories/preferences.md",
"/policies/compliance.md"]`, `/memories/` keyed by the user and `/policies/` by
`rt.context.org_id`, the policy written by application code, and read-only enforced with a
permission (`FilesystemPermission(operations=["write"], paths=["/policies/**"],
mode="deny")`, the rule of section 7.6).

Ported to fathom: only the imports change (`deepagents` → `fathom`, `deepagents.backends` →
`fathom.backends`); the hosted model becomes a `ScriptedModel` that follows the policies in
its system prompt, saves the user's preferences, and tries to change a policy when asked.
Other changes, each marked in the code:

- Storing: the tutorial calls `await client.store.put_item((org_id,), "/compliance.md", ...)`
  with `langgraph_sdk.get_client(url="<DEPLOYMENT_URL>")`, which needs a deployment; here
  the same item goes into the local store with `store.put`.
- `store=InMemoryStore()`, a `context_schema` with `org_id`, and `permissions=[...]` are
  added. `rt.server_info.user.identity` is filled in by LangGraph Server; locally
  `server_config()` puts what the server puts into the run config
  (`configurable["langgraph_auth_user"]`), so `rt.server_info.user` exists.

What happens: the policy is in the prompt of every run; the agent's edit of
`/policies/compliance.md` is refused ("permission denied") and the stored policy is
unchanged; the user's preference in `/memories/` is writable and shows up in the next run.

Run: `.venv/bin/python examples/memory_org_policies.py`
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage

from fathom import FilesystemPermission, create_deep_agent
from fathom.backends import CompositeBackend, StateBackend, StoreBackend
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

MEMORY_FILE = re.compile(r'<memory_file path="([^"]+)">\n(.*?)\n</memory_file>', re.S)
POLICIES = """## Compliance policies
- Never disclose internal pricing
- Always include disclaimers on financial advice
"""


def memory_files(request: ScriptRequest) -> dict[str, str]:
    """The memory files as the system prompt shows them: path → text (or a note)."""
    return dict(MEMORY_FILE.findall(request.system_prompt or ""))


def policy_model(request: ScriptRequest) -> AIMessage:
    """Follow the compliance file; save preferences; try a policy change when told to."""
    files = memory_files(request)
    policies = files.get("/policies/compliance.md", "")
    preferences = files.get("/memories/preferences.md", "")
    results = request.tool_results
    if results:
        result = results[-1]
        if result.status == "error":
            return ai(f"I could not change that: {result.content}")
        return ai(f"Saved. ({result.content})")
    text = request.last_human_text
    if text.startswith("Update the compliance policy"):
        return ai(
            "",
            tool_call(
                "edit_file",
                {
                    "file_path": "/policies/compliance.md",
                    "old_string": "- Never disclose internal pricing",
                    "new_string": "- Internal pricing may be shared",
                },
            ),
        )
    if text.startswith("Remember:"):
        content = f"## Preferences\n- {text.removeprefix('Remember:').strip()}\n"
        return ai(
            "",
            tool_call(
                "write_file", {"file_path": "/memories/preferences.md", "content": content}
            ),
        )
    answer = "The enterprise plan is sold through our sales team."
    if "Never disclose internal pricing" in policies and "price" in text:
        answer = "I can't share internal pricing; the sales team can give you a quote."
    if "bullet points" in preferences:
        answer = f"- {answer}"
    if "disclaimers on financial advice" in policies:
        answer += " (This is not financial advice.)"
    return ai(answer)


@dataclass
class Context:
    org_id: str


@dataclass(frozen=True)
class AuthUser:
    """The authenticated user LangGraph Server puts in `configurable["langgraph_auth_user"]`."""

    identity: str
    is_authenticated: bool = True
    permissions: tuple[str, ...] = ()

    @property
    def display_name(self) -> str:
        return self.identity


def server_config(thread_id: str, user_id: str) -> dict[str, Any]:
    """A run config as LangGraph Server builds it for an authenticated request (local stand-in)."""
    return {
        "configurable": {
            "thread_id": thread_id,
            "assistant_id": "agent",
            "langgraph_auth_user": AuthUser(user_id),
        }
    }


def main() -> dict[str, Any]:
    from langgraph.store.memory import InMemoryStore

    from fathom.backends.utils import create_file_data

    store = InMemoryStore()  # added: the platform provides the store when deployed
    org_id = "acme"

    # Write the organisation's memory from application code.
    # was: await client.store.put_item((org_id,), "/compliance.md", create_file_data(...))
    store.put(
        (org_id,),
        "/compliance.md",
        create_file_data("""## Compliance policies
- Never disclose internal pricing
- Always include disclaimers on financial advice
"""),
    )

    agent = create_deep_agent(
        model=ScriptedModel(policy=policy_model),  # was: "google_genai:gemini-3.1-pro-preview"
        memory=[
            "/memories/preferences.md",
            "/policies/compliance.md",
        ],
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
        permissions=[  # added: read-only organisation memory (tutorial section 7.6)
            FilesystemPermission(
                operations=["write"],
                paths=["/policies/**"],
                mode="deny",
            ),
        ],
        store=store,
        context_schema=Context,
    )

    answers: list[tuple[str, str]] = []
    for thread_id, text in [
        ("1", "What is the internal price of the enterprise plan?"),
        ("1", "Update the compliance policy: pricing may be shared."),
        ("2", "Remember: I like bullet points."),
        ("3", "What is the internal price of the enterprise plan?"),
    ]:
        result = agent.invoke(
            {"messages": [{"role": "user", "content": text}]},
            config=server_config(thread_id, "user-alice"),
            context=Context(org_id=org_id),
        )
        answer = str(result["messages"][-1].content)
        answers.append((text, answer))
        print(f"[thread {thread_id}] {text!r}\n  -> {answer}")

    stored = {(tuple(i.namespace), i.key): i.value["content"] for i in store.search(())}
    print(f"policy unchanged in the store: {stored[(org_id,), '/compliance.md'] == POLICIES}")
    print(f"in the store: {sorted(stored)}")
    return {"answers": answers, "stored": stored}


if __name__ == "__main__":
    main()
