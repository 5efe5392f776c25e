"""Discovery, `disable_a2a` and unknown contexts: a2a-sdk's real client against real HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from a2a.client import A2ACardResolver, A2AClientError, ClientConfig, create_client
from a2a.helpers.proto_helpers import get_message_text
from a2a.types import TaskState
from a2a.utils.errors import InvalidParamsError, UnsupportedOperationError
from langgraph_sdk import get_client
from tests.protocols.a2a.support import DEADLINE_S, a2a_client, echo_agent, serve, user_message

DISCOVERY = "/.well-known/agent-card.json"


@pytest.fixture
async def url() -> AsyncIterator[str]:
    async with serve({"echo": echo_agent()}) as (base, _app):
        yield base


async def test_the_discovery_path_serves_the_card_and_the_client_talks_to_its_url(
    url: str,
) -> None:
    async with httpx.AsyncClient(timeout=DEADLINE_S) as http:
        resolver = A2ACardResolver(http, url)
        card = await resolver.get_agent_card(relative_card_path=f"{DISCOVERY}?assistant_id=echo")
        assert card.name == "echo"
        assert card.supported_interfaces[0].url == f"{url}/a2a/echo"
        client = await create_client(card, ClientConfig(httpx_client=http, streaming=False))
        async with client:
            events = [e async for e in client.send_message(user_message("found you"))]
    task = events[-1].task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert get_message_text(task.status.message) == "echo: found you"


async def test_the_discovery_path_takes_an_assistant_id_and_keeps_the_per_agent_path(
    url: str,
) -> None:
    lg = get_client(url=url)
    created = await lg.assistants.create("echo", name="Echo Two")
    async with httpx.AsyncClient() as http:
        query = {"assistant_id": created["assistant_id"]}
        by_id = await http.get(f"{url}{DISCOVERY}", params=query)
        per_agent = await http.get(f"{url}/a2a/echo{DISCOVERY}")
        missing = await http.get(f"{url}{DISCOVERY}")
        unknown = await http.get(f"{url}{DISCOVERY}", params={"assistant_id": "nobody"})
    assert by_id.status_code == 200 and by_id.json()["name"] == "Echo Two"
    assert by_id.json()["supportedInterfaces"][0]["url"] == f"{url}/a2a/{created['assistant_id']}"
    assert per_agent.status_code == 200 and per_agent.json()["name"] == "echo"
    assert missing.status_code == 400 and "assistant_id" in missing.json()["detail"]
    assert unknown.status_code == 404 and "nobody" in unknown.json()["detail"]


async def test_disable_a2a_in_metadata_hides_the_card_and_refuses_requests(url: str) -> None:
    lg = get_client(url=url)
    assistant = await lg.assistants.create("echo", name="private")
    before = await lg.threads.search(limit=100)
    agent_url = f"{url}/a2a/{assistant['assistant_id']}"
    async with a2a_client(agent_url) as client:  # the card is read while A2A is still on
        await lg.assistants.update(assistant["assistant_id"], metadata={"disable_a2a": True})
        with pytest.raises(UnsupportedOperationError, match="disable_a2a"):
            [e async for e in client.send_message(user_message("hi"))]
    async with httpx.AsyncClient() as http:
        query = {"assistant_id": assistant["assistant_id"]}
        for res in (
            await http.get(f"{agent_url}{DISCOVERY}"),
            await http.get(f"{url}{DISCOVERY}", params=query),
        ):
            assert res.status_code == 404 and "disable_a2a" in res.json()["detail"]
        body = {"jsonrpc": "2.0", "id": 7, "method": "tasks/get", "params": {"id": "t"}}
        rpc = (await http.post(agent_url, json=body)).json()
    assert rpc["id"] == 7 and rpc["error"]["code"] == -32004
    assert "disable_a2a" in rpc["error"]["message"]
    assert await lg.threads.search(limit=100) == before  # nothing ran
    with pytest.raises(A2AClientError):  # a new client finds no card
        async with httpx.AsyncClient(timeout=DEADLINE_S) as http:
            await create_client(agent_url, ClientConfig(httpx_client=http))
    # Turning it back on (metadata is read per request) serves it again; others never stopped.
    await lg.assistants.update(assistant["assistant_id"], metadata={"disable_a2a": False})
    for target in (agent_url, f"{url}/a2a/echo"):
        async with a2a_client(target) as client:
            task = [e async for e in client.send_message(user_message("back"))][-1].task
        assert get_message_text(task.status.message) == "echo: back"


async def test_an_unknown_context_id_is_an_a2a_error_and_creates_no_thread(url: str) -> None:
    lg = get_client(url=url)
    before = await lg.threads.search(limit=100)
    async with a2a_client(f"{url}/a2a/echo") as client:
        with pytest.raises(InvalidParamsError) as raised:
            [e async for e in client.send_message(user_message("hi", context_id="never-seen"))]
    message = str(raised.value)
    assert "Unknown contextId 'never-seen'" in message and "without a contextId" in message
    assert await lg.threads.search(limit=100) == before
    # What the error says works: no contextId starts one, and it continues.
    async with a2a_client(f"{url}/a2a/echo") as client:
        first = [e async for e in client.send_message(user_message("one"))][-1].task
        again = user_message("two", context_id=first.context_id)
        second = [e async for e in client.send_message(again)][-1].task
    assert get_message_text(second.status.message) == "echo: two"
