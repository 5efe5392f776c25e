"""Organisation memory: `/policies/` reads the organisation's namespace and refuses changes.

The application preloads the policies through the store API; the agent (a scripted model)
reads them, and its write, edit and delete there are refused with an answer that says the
files are read-only organisation policy, while nothing in the store changes.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from fathom import create_deep_agent, create_file_data
from fathom.backends import CompositeBackend, StateBackend, StoreBackend
from fathom.middleware.org_memory import POLICIES_ROUTE, organisation_policies
from fathom.testing import ScriptedModel, ai, tool_call

RULE = "Never share customer data outside the EU.\n"
POLICY = "/policies/compliance.md"


def preload(store: InMemoryStore, org_id: str, value: dict[str, Any]) -> None:
    """What the application does (`client.store.put_item` against a server)."""
    store.put((org_id,), "/compliance.md", value)


def org_from_context(rt: Any) -> tuple[str, ...]:
    return (rt.context["org_id"],)


def agent_for(store: InMemoryStore, model: ScriptedModel, **options: Any) -> Any:
    backend = CompositeBackend(
        StateBackend(),
        {
            **organisation_policies(org_from_context),
            "/memories/": StoreBackend(namespace=lambda rt: (rt.context["org_id"], "alice")),
        },
    )
    return create_deep_agent(
        model, store=store, backend=backend, checkpointer=InMemorySaver(), **options
    )


def run(agent: Any, org_id: str, thread: str = "t") -> list[ToolMessage]:
    state = agent.invoke(
        {"messages": [{"role": "user", "content": "check the policy"}]},
        {"configurable": {"thread_id": thread}},
        context={"org_id": org_id},
    )
    return [m for m in state["messages"] if isinstance(m, ToolMessage)]


def trying_to_change_the_policy() -> ScriptedModel:
    calls = [
        tool_call("read_file", {"file_path": POLICY}),
        tool_call("write_file", {"file_path": POLICY, "content": "anything goes\n"}),
        tool_call("edit_file", {"file_path": POLICY, "old_string": "Never", "new_string": "Do"}),
        tool_call("delete", {"file_path": POLICY}),
        tool_call("write_file", {"file_path": "/policies/new.md", "content": "mine\n"}),
        tool_call("ls", {"path": "/policies/"}),
        tool_call("write_file", {"file_path": "/memories/notes.md", "content": "ok\n"}),
    ]
    return ScriptedModel(replies=[*(ai("", call) for call in calls), "done"])


@pytest.mark.parametrize(
    "value", [dict(create_file_data(RULE)), {"content": RULE}], ids=["file data", "content only"]
)
def test_the_agent_reads_the_policy_and_every_change_to_it_is_refused(
    value: dict[str, Any],
) -> None:
    store = InMemoryStore()
    preload(store, "acme", value)
    answers = run(agent_for(store, trying_to_change_the_policy()), "acme")
    read, write, edit, delete, create, listing, own = answers
    assert read.status != "error" and "Never share customer data outside the EU." in read.text
    for refused, path in ((write, POLICY), (edit, POLICY), (delete, POLICY),
                          (create, "/policies/new.md")):  # fmt: skip
        assert refused.status == "error", refused.text
        assert f"'{path}' is organisation policy, read-only for you" in refused.text
        assert "nothing was changed" in refused.text
    assert "/policies/compliance.md" in listing.text
    assert own.status != "error"  # the agent's own memory stays writable
    assert store.get(("acme",), "/compliance.md").value == value  # type: ignore[union-attr]
    assert store.get(("acme",), "/new.md") is None
    assert [item.key for item in store.search(("acme", "alice"))] == ["/notes.md"]


def test_each_organisation_sees_only_its_own_policies() -> None:
    store = InMemoryStore()
    preload(store, "acme", {"content": RULE})
    preload(store, "globex", {"content": "Ship on Fridays.\n"})
    reading = ScriptedModel(
        policy=lambda request: (
            "done"
            if request.turn_results
            else ai("", tool_call("read_file", {"file_path": POLICY}))
        )
    )
    agent = agent_for(store, reading)
    assert "Ship on Fridays." in run(agent, "globex", "g")[0].text
    assert "customer data" in run(agent, "acme", "a")[0].text


def test_policies_load_into_the_prompt_as_memory() -> None:
    store = InMemoryStore()
    preload(store, "acme", {"content": RULE})
    model = ScriptedModel(replies=["ok"])
    run(agent_for(store, model, memory=[POLICY]), "acme")
    prompt = model.requests[0].system_prompt or ""
    assert f'<memory_file path="{POLICY}">\n{RULE.strip()}\n</memory_file>' in prompt


def test_a_route_must_be_a_directory_below_the_root() -> None:
    assert list(organisation_policies(("acme",))) == [POLICIES_ROUTE]
    assert list(organisation_policies(("acme",), route="/org/rules")) == ["/org/rules/"]
    with pytest.raises(ValueError, match="below"):
        organisation_policies(("acme",), route="/")
    with pytest.raises(ValueError, match="not a usable path"):
        organisation_policies(("acme",), route="/org/\x00")
    with pytest.raises(ValueError, match="namespace"):
        organisation_policies(("bad*",))
