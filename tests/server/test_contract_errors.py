"""Requests a client gets wrong come back as a JSON `{"detail": ...}` 4xx on both servers.

Where the two servers pick different codes, each is asserted exactly (see docs/server.md):
`langgraph dev` answers 422 for an unknown assistant (its assistant ids must be UUIDs or
graph names) and accepts any body size; fathom answers 404 and 413. fathom also takes
slug thread ids (`[A-Za-z0-9_-]{1,128}`) where `langgraph dev` takes only UUIDs.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
from tests.server.servers import ServerProcess


def _detail(response: httpx.Response) -> str:
    body = response.json()
    assert isinstance(body, dict)
    assert isinstance(body["detail"], str)
    assert body["detail"]
    return body["detail"]


@pytest.fixture
async def http(server: ServerProcess) -> AsyncIterator[httpx.AsyncClient]:
    """A plain HTTP client, for requests the SDK would refuse to send."""
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as session:
        yield session


async def _thread(http: httpx.AsyncClient) -> str:
    response = await http.post("/threads", json={})
    response.raise_for_status()
    return response.json()["thread_id"]


async def test_unknown_assistant_is_refused(server: ServerProcess, http: httpx.AsyncClient) -> None:
    thread_id = await _thread(http)

    response = await http.post(f"/threads/{thread_id}/runs", json={"assistant_id": "no-such"})

    assert response.status_code == {"fathom": 404, "langgraph-dev": 422}[server.kind]
    assert "no-such" in _detail(response)


async def test_malformed_json_is_a_422(http: httpx.AsyncClient) -> None:
    response = await http.post(
        "/threads", content=b"{not json", headers={"content-type": "application/json"}
    )

    assert response.status_code == 422
    _detail(response)


async def test_wrongly_typed_run_body_is_a_422(http: httpx.AsyncClient) -> None:
    thread_id = await _thread(http)

    response = await http.post(f"/threads/{thread_id}/runs", json={"assistant_id": 5})

    assert response.status_code == 422
    _detail(response)


async def test_malformed_thread_id_is_a_422(http: httpx.AsyncClient) -> None:
    response = await http.get("/threads/bad%20id$")
    run = await http.post("/threads/bad%20id$/runs", json={"assistant_id": "agent"})

    assert response.status_code == 422
    assert run.status_code == 422
    _detail(response)
    _detail(run)


async def test_slug_thread_ids_are_fathoms_and_not_langgraph_devs(
    server: ServerProcess, http: httpx.AsyncClient
) -> None:
    # fathom takes a UUID or 1-128 of [A-Za-z0-9_-] as a thread id; langgraph dev only UUIDs.
    response = await http.get("/threads/not-a-uuid")

    assert response.status_code == {"fathom": 404, "langgraph-dev": 422}[server.kind]
    _detail(response)


async def test_unknown_thread_and_run_are_404(http: httpx.AsyncClient) -> None:
    missing = str(uuid.uuid4())
    thread = await http.get(f"/threads/{missing}")
    run = await http.post(f"/threads/{missing}/runs", json={"assistant_id": "agent"})
    existing = await _thread(http)
    unknown_run = await http.get(f"/threads/{existing}/runs/{uuid.uuid4()}")

    assert [thread.status_code, run.status_code, unknown_run.status_code] == [404, 404, 404]
    assert missing in _detail(thread)
    _detail(run)
    _detail(unknown_run)


async def test_oversized_body(server: ServerProcess, http: httpx.AsyncClient) -> None:
    body = b'{"metadata": {"blob": "' + b"a" * (11 * 1024 * 1024) + b'"}}'

    headers = {"content-type": "application/json"}
    response = await http.post("/threads", content=body, headers=headers)

    if server.kind == "fathom":
        assert response.status_code == 413
        _detail(response)
    else:
        assert response.status_code == 200  # langgraph dev sets no limit
