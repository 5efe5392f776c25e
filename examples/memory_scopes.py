"""Memory scopes: agent-level memory shared by all users, user-level memory for each user.

Deep Agents tutorial, section 12.2 (记忆范围 / memory scopes): agent-level memory with the
`/memories/` route keyed by `(rt.server_info.assistant_id,)`, user-level memory keyed by
`(rt.server_info.user.identity,)`, and the full example "isolated memory across users"
(preferences stored for `user-alice` and `user-bob`, a backend factory, one question).

Ported to fathom: only the imports change (`deepagents` → `fathom`, `deepagents.backends` →
`fathom.backends`); the hosted model becomes a `ScriptedModel` that follows the memory in
its system prompt and saves what it is told to remember (`write_file` for a file not
created yet, else `edit_file`). Other changes, each marked in the code:

- `rt.server_info` is filled in by LangGraph Server; in a plain local run it is `None`, so
  the namespace factory fails and the memory file is "not loaded" (shown first). To run
  the tutorial's code locally, `server_config()` puts into the run config what the server
  puts there for an authenticated request (`configurable["assistant_id"]` and
  `configurable["langgraph_auth_user"]`), from which LangGraph builds `rt.server_info`.
  When deployed the server sets these from the request; never let callers choose them.
- `store=InMemoryStore()` is added where the tutorial relies on the platform's store.
- Store keys drop the route prefix (`"/preferences.md"`, not `"/memories/preferences.md"`):
  a backend behind the `/memories/` route sees paths without it, so the tutorial's key
  would be the file `/memories/memories/preferences.md`.
- Skills (`skills=["/skills/"]`) are kept but not the subject here (see the skills
  examples); in the full example Alice's stored skill is offered to Alice only. In the
  local run without the server's config the skill source cannot be read either, and the
  skills middleware warns about it.

Run: `.venv/bin/python examples/memory_scopes.py`
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.store.memory import InMemoryStore

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

MEMORY_FILE = re.compile(r'<memory_file path="([^"]+)">\n(.*?)\n</memory_file>', re.S)


def memory_files(request: ScriptRequest) -> dict[str, str]:
    """The memory files as the system prompt shows them: path → text (or a note)."""
    return dict(MEMORY_FILE.findall(request.system_prompt or ""))


def loaded(text: str) -> bool:
    return not text.startswith("(")


def remember(path: str, current: str, fact: str) -> AIMessage:
    """Save `fact` to `path`: create the file, or add a line after its last one."""
    if not loaded(current):
        content = f"## Memory\n- {fact}\n"
        return ai("", tool_call("write_file", {"file_path": path, "content": content}))
    last = current.rstrip("\n").splitlines()[-1]
    return ai(
        "",
        tool_call(
            "edit_file",
            {"file_path": path, "old_string": last, "new_string": f"{last}\n- {fact}"},
        ),
    )


CSV_ANSWERS = {
    "Python": (
        "```python\nimport csv\nwith open('data.csv') as f:\n    rows = list(csv.reader(f))\n```"
    ),
    "TypeScript": (
        "```typescript\nimport { readFileSync } from 'fs';\n"
        "const rows = readFileSync('data.csv', 'utf8').split('\\n').map(l => l.split(','));\n```"
    ),
}


def memory_policy(request: ScriptRequest) -> AIMessage:
    """Follow the memory in the prompt; save facts the user asks to remember."""
    files = memory_files(request)
    results = request.tool_results
    if results:
        return ai(f"Saved. ({results[-1].content})")
    text = request.last_human_text
    path, current = next(iter(files.items()))
    if text.startswith("Remember:"):
        return remember(path, current, text.removeprefix("Remember:").strip())
    if "CSV" in text:
        language = next((lang for lang in CSV_ANSWERS if lang in current), None)
        if language is None:
            return ai(f"I have no saved preferences ({path}: {current}). Which language?")
        if "concise" in current:
            return ai(f"- Use the csv module:\n{CSV_ANSWERS[language]}")
        return ai(
            f"Reading a CSV file means splitting each line into fields. In {language}, "
            f"read the file, split it into lines, then split each line on commas:\n"
            f"{CSV_ANSWERS[language]}\nFor quoted fields, use a CSV library instead."
        )
    if loaded(current):
        facts = [line[2:] for line in current.splitlines() if line.startswith("- ")]
        return ai("From my memory: " + "; ".join(facts))
    return ai(f"My memory is empty ({path}: {current})")


def model() -> ScriptedModel:
    return ScriptedModel(policy=memory_policy)  # was: "google_genai:gemini-3.1-pro-preview"


@dataclass(frozen=True)
class AuthUser:
    """The authenticated user LangGraph Server puts in `configurable["langgraph_auth_user"]`
    (the `BaseUser` fields used here)."""

    identity: str
    is_authenticated: bool = True
    permissions: tuple[str, ...] = ()

    @property
    def display_name(self) -> str:
        return self.identity


def server_config(thread_id: str, assistant_id: str, user_id: str) -> dict[str, Any]:
    """A run config as LangGraph Server builds it for an authenticated request (local stand-in)."""
    return {
        "configurable": {
            "thread_id": thread_id,
            "assistant_id": assistant_id,
            "langgraph_auth_user": AuthUser(user_id),
        }
    }


def ask(agent: Any, text: str, config: dict[str, Any], label: str) -> str:
    result = agent.invoke({"messages": [{"role": "user", "content": text}]}, config=config)
    answer = str(result["messages"][-1].content)
    print(f"  [{label}] {text!r}")
    for line in answer.splitlines():
        print(f"      {line}")
    return answer


def agent_level() -> dict[str, Any]:
    """Agent-level memory: `(assistant_id,)`; every conversation of the agent shares it."""
    from fathom.backends import CompositeBackend, StateBackend, StoreBackend

    store = InMemoryStore()  # added: the platform provides the store when deployed
    agent = create_deep_agent(
        model=model(),  # was: "google_genai:gemini-3.1-pro-preview"
        memory=["/memories/AGENTS.md"],
        skills=["/skills/"],
        backend=CompositeBackend(
            default=StateBackend(),
            routes={
                "/memories/": StoreBackend(
                    namespace=lambda rt: (
                        rt.server_info.assistant_id,
                    ),
                ),
                "/skills/": StoreBackend(
                    namespace=lambda rt: (
                        rt.server_info.assistant_id,
                    ),
                ),
            },
        ),
        store=store,
    )

    print("agent-level memory, namespace (rt.server_info.assistant_id,):")
    local = ask(agent, "What do you know?", {"configurable": {"thread_id": "local"}}, "local")
    answers = {
        "local": local,
        "alice": ask(
            agent,
            "Remember: The team deploys on Tuesdays.",
            server_config("t-1", "support-bot", "user-alice"),
            "support-bot, user-alice",
        ),
        "bob": ask(
            agent,
            "What do you know?",
            server_config("t-2", "support-bot", "user-bob"),
            "support-bot, user-bob",
        ),
        "bob_saves": ask(
            agent,
            "Remember: Releases need two approvals.",
            server_config("t-2", "support-bot", "user-bob"),
            "support-bot, user-bob",
        ),
        "alice_later": ask(
            agent,
            "What do you know?",
            server_config("t-3", "support-bot", "user-alice"),
            "support-bot, user-alice",
        ),
        "other": ask(
            agent,
            "What do you know?",
            server_config("t-4", "sales-bot", "user-bob"),
            "sales-bot, user-bob",
        ),
    }
    stored = {(tuple(i.namespace), i.key): i.value["content"] for i in store.search(())}
    print(f"  in the store: {sorted(stored)}")
    return {"answers": answers, "stored": stored}


def user_level() -> dict[str, Any]:
    """User-level memory: `(user identity,)`; each user has an isolated copy."""
    from fathom.backends import CompositeBackend, StateBackend, StoreBackend

    store = InMemoryStore()  # added: the platform provides the store when deployed
    agent = create_deep_agent(
        model=model(),  # was: "google_genai:gemini-3.1-pro-preview"
        memory=["/memories/preferences.md"],
        skills=["/skills/"],
        backend=CompositeBackend(
            default=StateBackend(),
            routes={
                "/memories/": StoreBackend(
                    namespace=lambda rt: (rt.server_info.user.identity,),
                ),
                "/skills/": StoreBackend(
                    namespace=lambda rt: (rt.server_info.user.identity,),
                ),
            },
        ),
        store=store,
    )

    print("user-level memory, namespace (rt.server_info.user.identity,):")
    answers = {
        "alice_saves": ask(
            agent,
            "Remember: I like answers as tables.",
            server_config("u-1", "support-bot", "user-alice"),
            "user-alice",
        ),
        "bob": ask(
            agent,
            "What do you know?",
            server_config("u-2", "support-bot", "user-bob"),
            "user-bob",
        ),
        "alice": ask(
            agent,
            "What do you know?",
            server_config("u-3", "support-bot", "user-alice"),
            "user-alice",
        ),
    }
    stored = {(tuple(i.namespace), i.key): i.value["content"] for i in store.search(())}
    print(f"  in the store: {sorted(stored)}")
    return {"answers": answers, "stored": stored}


def isolated_users() -> dict[str, Any]:
    """The tutorial's full example: isolated memory across users."""
    from langchain_core.utils.uuid import uuid7
    from langgraph.store.memory import InMemoryStore

    from fathom.backends import CompositeBackend, StateBackend, StoreBackend
    from fathom.backends.utils import create_file_data

    store = InMemoryStore()  # Use platform store when deploying to LangSmith

    # Store preferences for two users
    store.put(
        ("user-alice",),
        "/preferences.md",  # was: "/memories/preferences.md" (the route prefix is not stored)
        create_file_data("""## Preferences
- Likes concise bullet points
- Prefers Python examples
"""),
    )
    store.put(
        ("user-bob",),
        "/preferences.md",  # was: "/memories/preferences.md"
        create_file_data("""## Preferences
- Likes detailed explanations
- Prefers TypeScript examples
"""),
    )

    # Store a skill for Alice
    store.put(
        ("user-alice",),
        "/langgraph-docs/SKILL.md",  # was: "/skills/langgraph-docs/SKILL.md"
        create_file_data("""---
name: langgraph-docs
description: Fetch relevant LangGraph documentation to provide accurate guidance.
---

# langgraph-docs

Use the fetch_url tool to read https://docs.langchain.com/llms.txt, then fetch relevant pages.
"""),
    )

    llm = model()
    agent = create_deep_agent(
        model=llm,  # was: "google_genai:gemini-3.1-pro-preview"
        memory=["/memories/preferences.md"],
        skills=["/skills/"],
        backend=lambda rt: CompositeBackend(
            default=StateBackend(rt),
            routes={
                "/memories/": StoreBackend(
                    rt,
                    namespace=lambda rt: (rt.server_info.user.identity,),
                ),
                "/skills/": StoreBackend(
                    rt,
                    namespace=lambda rt: (rt.server_info.user.identity,),
                ),
            },
        ),
        store=store,
    )

    print("isolated memory across users (stored preferences):")
    # When deployed, each authenticated request resolves
    # `rt.server_info.user.identity` to the calling user, so Alice and Bob
    # automatically see only their own preferences.
    question = "How do I read a CSV file?"
    answers = {
        "local": ask(
            agent, question, {"configurable": {"thread_id": str(uuid7())}}, "local, no server"
        ),
        "alice": ask(
            agent, question, server_config(str(uuid7()), "agent", "user-alice"), "user-alice"
        ),
        "bob": ask(agent, question, server_config(str(uuid7()), "agent", "user-bob"), "user-bob"),
    }
    alice_prompt, bob_prompt = (r.system_prompt or "" for r in llm.requests[-2:])
    skill_seen = {"alice": "langgraph-docs" in alice_prompt, "bob": "langgraph-docs" in bob_prompt}
    print(f"  langgraph-docs skill in the prompt: {skill_seen}")
    return {"answers": answers, "prompts": {"alice": alice_prompt, "bob": bob_prompt}}


def main() -> dict[str, Any]:
    return {"agent": agent_level(), "user": user_level(), "isolated": isolated_users()}


if __name__ == "__main__":
    main()
