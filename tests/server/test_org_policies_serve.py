"""Organisation policies over HTTP: preloaded with `client.store.put_item`, read-only to the agent.

The real `langgraph-sdk` client talks to a `fathom serve` subprocess serving a deployment of
its own (written below into a temporary folder): an agent whose `/policies/` route is the
organisation's store namespace, read-only, and whose scripted model reads the policy and then
tries to edit it. A plain-string store value is refused by both `fathom serve` and
`langgraph dev` (a store value is an object).
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from tests.server.servers import ServerProcess, fathom_serve_available

GRAPH = textwrap.dedent(
    """
    from fathom import create_deep_agent
    from fathom.backends import CompositeBackend, StateBackend
    from fathom.middleware.org_memory import organisation_policies
    from fathom.testing import ScriptedModel, ai, tool_call

    POLICY = "/policies/compliance.md"


    def policy(request):
        done = len(request.turn_results)
        if done == 0:
            return ai("", tool_call("read_file", {"file_path": POLICY}))
        if done == 1:
            return ai("", tool_call("edit_file", {
                "file_path": POLICY, "old_string": "Keep", "new_string": "Move"}))
        return "The policy stays as it is."


    def org(rt):
        return (rt.context["org_id"],)


    agent = create_deep_agent(
        ScriptedModel(policy=policy),
        backend=CompositeBackend(StateBackend(), organisation_policies(org)),
        memory=[POLICY],
    )
    """
)
RULE = "Keep customer data in the EU.\n"


@pytest.fixture(scope="module")
def policies_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    if not fathom_serve_available():
        pytest.skip("this fathom has no `serve` command")
    workdir = tmp_path_factory.mktemp("org-policies")
    (workdir / "graphs.py").write_text(GRAPH)
    config = {"dependencies": ["."], "graphs": {"agent": "./graphs.py:agent"}}
    (workdir / "langgraph.json").write_text(json.dumps(config))
    process = ServerProcess(kind="fathom", workdir=workdir, extra_args=("--database", "memory"))
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
async def sdk(policies_server: ServerProcess) -> AsyncIterator[LangGraphClient]:
    client = get_client(url=policies_server.url, api_key=None)
    try:
        yield client
    finally:
        await client.http.client.aclose()


async def test_policies_preloaded_through_the_store_api_are_read_only_to_the_agent(
    sdk: LangGraphClient,
) -> None:
    await sdk.store.put_item(["acme"], "/compliance.md", {"content": RULE})
    thread = await sdk.threads.create()
    state = await sdk.runs.wait(
        thread["thread_id"], "agent",
        input={"messages": [{"role": "user", "content": "relax the policy"}]},
        context={"org_id": "acme"},
    )  # fmt: skip
    assert isinstance(state, dict)
    tools = [m for m in state["messages"] if m["type"] == "tool"]
    assert [m["name"] for m in tools] == ["read_file", "edit_file"]
    assert "Keep customer data in the EU." in tools[0]["content"]
    assert tools[1]["status"] == "error"
    assert "is organisation policy, read-only for you" in tools[1]["content"]
    item = await sdk.store.get_item(["acme"], "/compliance.md")
    assert item is not None and item["value"] == {"content": RULE}


async def test_a_plain_string_store_value_is_refused(client: LangGraphClient) -> None:
    with pytest.raises(httpx.HTTPStatusError) as refused:
        await client.store.put_item(["acme"], "/compliance.md", "plain text")  # type: ignore[arg-type]
    assert refused.value.response.status_code == 422
    assert await client.store.get_item(["acme"], "/compliance.md") is None
