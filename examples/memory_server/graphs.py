"""The memory chapter's two graphs, served from `langgraph.json`: `agent` and `consolidation_agent`.

`agent` is a deep agent with the chapter's memory, all of it in the server's store:

- **user memory**: `/memories/` is a `StoreBackend` on the caller's namespace,
  `(rt.server_info.user.identity,)` (the reference's user-level scope). Its file
  `/memories/AGENTS.md` is in every run's prompt (`memory=[...]`, read fresh each run), and
  the agent writes it when the user asks it to remember something (the hot path);
- **organisation memory**: `/policies/` is the caller's organisation's namespace, `(org_id,)`,
  read-only (`organisation_policies`); `/policies/compliance.md` is in every prompt, and the
  application puts it there (`load_policies.py`);
- **episodic memory**: `ConversationSearchMiddleware()` indexes each thread's messages under
  the caller and gives the agent `search_conversations` over that user's earlier threads
  (the index follows the server's store; no configuration).

`consolidation_agent` is `create_consolidation_agent` on the same `/memories/` backend and file:
a cron (`client.py`) runs it as the user who created the cron; it reads that user's
conversations since its last run and merges what they said about themselves into
`/memories/AGENTS.md`, which the user's next thread shows.

Both models are `ScriptedModel` policies so that the example runs offline, with no key; they
act as a sensible model would on the phrases `client.py` uses. Put your model instead:
`create_deep_agent("openai:gpt-5-mini", ...)`, `create_consolidation_agent("openai:gpt-5-mini",
...)`, and drop the policies.
"""

import re
from typing import Any

from langgraph.runtime import Runtime

from fathom import create_deep_agent
from fathom.backends import CompositeBackend, StateBackend, StoreBackend
from fathom.memory import ConversationSearchMiddleware, create_consolidation_agent
from fathom.middleware.org_memory import organisation_policies
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

MEMORY = "/memories/AGENTS.md"
"""The user's memory file: written by the agent (hot path) and by consolidation."""
POLICY = "/policies/compliance.md"
"""The organisation's policy file (store key `/compliance.md` in the namespace `(org_id,)`)."""
HEADING = "# About the user\n"
"""The first line of a new memory file."""


def caller(rt: Runtime) -> Any:
    """The authenticated user of the run (what `auth.py` returned), as the server gives it.

    Raises:
        LookupError: the run has no user: the graph runs outside a server with `auth`.
    """
    info = rt.server_info
    if info is None or info.user is None or not info.user.identity:
        raise LookupError("this graph needs an authenticated user: serve it with auth.py")
    return info.user


def user_namespace(rt: Runtime) -> tuple[str, ...]:
    """The caller's own store namespace: `(identity,)`, the authenticated user.

    The reference's form, `lambda rt: (rt.server_info.user.identity,)`, with a clear error
    when there is no user.
    """
    return (str(caller(rt).identity),)


def org_namespace(rt: Runtime) -> tuple[str, ...]:
    """The caller's organisation's namespace, `(org_id,)`, from the user `auth.py` returned.

    The reference takes it from the run's context (`rt.context.org_id`); the authenticated
    user is the safer source: a caller cannot name another organisation.
    """
    return (str(caller(rt)["org_id"]),)


def memory_backend() -> CompositeBackend:
    """Thread-local files, `/memories/` in the caller's namespace, `/policies/` read-only."""
    return CompositeBackend(
        StateBackend(),
        {
            "/memories/": StoreBackend(namespace=user_namespace),
            **organisation_policies(org_namespace),
        },
    )


# ------------------------------------------------------------------------ scripted models


def shown(request: ScriptRequest, path: str) -> str:
    """The text of memory file `path` as the prompt shows it ("" when not created yet)."""
    found = re.search(
        f'<memory_file path="{re.escape(path)}">\\n(.*?)\\n</memory_file>',
        request.system_prompt or "",
        re.DOTALL,
    )
    text = found.group(1) if found else ""
    return "" if text.startswith("(") else text + "\n"


def bullets(text: str) -> list[str]:
    """The `- ...` lines of a memory or policy file, without the dash."""
    return [line[2:].strip() for line in text.splitlines() if line.startswith("- ")]


def numbered(tool_text: str) -> str:
    """The file text inside a tool answer that shows it with line numbers (`   1\\t...`)."""
    lines = re.findall(r"^\s*\d+\t(.*)$", tool_text, re.MULTILINE)
    return "\n".join(lines) + "\n" if lines else ""


def _append(current: str, facts: list[str]) -> str:
    return (current or HEADING) + "".join(f"- {fact}\n" for fact in facts)


def conversation_policy(request: ScriptRequest):
    """The conversation agent's stand-in model.

    - `remember: FACT` writes `- FACT` into the memory file (as the prompt showed it);
    - `recall WORDS` searches the user's earlier conversations and answers with the hits;
    - `relax the policy` tries to edit the policy file and answers with what it was told;
    - a question answers with what the prompt shows: the memory's facts and the policies;
    - anything else is noted (and left to consolidation).
    """
    text = request.last_human_text.strip()
    done = request.turn_results
    if text.startswith("remember: "):
        fact = text.removeprefix("remember: ").strip()
        if not done:
            content = _append(shown(request, MEMORY), [fact])
            return ai("", tool_call("write_file", {"file_path": MEMORY, "content": content}))
        if done[-1].status == "error":
            return ai(f"I could not save that: {done[-1].text}")
        return ai(f"I will remember that {fact}.")
    if text.startswith("recall "):
        if not done:
            query = text.removeprefix("recall ")
            return ai("", tool_call("search_conversations", {"query": query}))
        return ai(done[-1].text)
    if text == "relax the policy":
        if not done:
            rules = bullets(shown(request, POLICY)) or ["(none)"]
            edit = {"file_path": POLICY, "old_string": rules[0], "new_string": "(relaxed)"}
            return ai("", tool_call("edit_file", edit))
        return ai(done[-1].text)
    if not text.endswith("?"):
        return ai("Noted.")
    facts = "; ".join(bullets(shown(request, MEMORY))) or "nothing yet"
    rules = "; ".join(bullets(shown(request, POLICY))) or "none"
    return ai(f"What I know about you: {facts}. Policies I follow: {rules}.")


FIRST_PERSON = re.compile(r"^user: (I .+?)[.!]$", re.MULTILINE)
"""A user's statement about themselves in the conversations consolidation is given."""


def merge_policy(request: ScriptRequest):
    """The consolidation agent's stand-in model: each `I ...` statement of the user that the
    memory file does not hold yet becomes a `- ...` line of it. A refused write (another
    writer changed the file meanwhile) is applied again to the text the refusal shows."""
    done = request.turn_results
    if done and done[-1].status != "error":
        return ai("Merged what the user said about themselves.")
    current = numbered(done[-1].text) if done else shown(request, MEMORY)
    if done and not current:
        return ai(f"Could not merge: {done[-1].text}")
    known = set(bullets(current))
    said = dict.fromkeys(FIRST_PERSON.findall(request.last_human_text))
    facts = [fact for fact in said if fact not in known]
    if not facts:
        return ai("Nothing new worth remembering.")
    content = _append(current, facts)
    return ai("", tool_call("write_file", {"file_path": MEMORY, "content": content}))


# ------------------------------------------------------------------------ the graphs

agent = create_deep_agent(
    ScriptedModel(policy=conversation_policy),  # your model here, e.g. "openai:gpt-5-mini"
    backend=memory_backend(),
    memory=[MEMORY, POLICY],
    middleware=[ConversationSearchMiddleware()],
    name="agent",
)

consolidation_agent = create_consolidation_agent(
    ScriptedModel(policy=merge_policy),  # your model here
    backend=memory_backend(),
    memory_path=MEMORY,
)
