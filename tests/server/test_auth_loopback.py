"""Loopback calls under custom auth: code inside a run calls its own app as the run's user.

An async subagent without a url (and the parent notifier) reach the app that hosts their run
in process. With `langgraph.json`'s `auth`, those calls carry no token of their own; the app
takes them as the user who started the run, proven by the app's loopback secret. A client
outside the app's runs, or one that merely names the header, gets no such pass.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any, TypedDict

import httpx
import pytest
from langgraph.graph import END, START, StateGraph
from langgraph_sdk import Auth
from starlette.applications import Starlette

from fathom.hosting.client import LOOPBACK_HEADER, in_process_client
from fathom.hosting.loopback import hosting_app
from fathom.server import create_app

AUTH_FILE = Path(__file__).resolve().parent / "auth_deploy" / "auth.py"


def _load_auth() -> Auth:
    spec = importlib.util.spec_from_file_location("fathom_test_loopback_auth", AUTH_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    auth = module.auth
    assert isinstance(auth, Auth)
    return auth


class _State(TypedDict, total=False):
    owner: str | None
    child_thread: str | None


async def _call_own_server(state: _State) -> dict[str, Any]:
    app = hosting_app()
    assert app is not None
    client = in_process_client(app, loopback=True)
    try:
        thread = await client.threads.create()
    finally:
        await client.http.client.aclose()
    return {"owner": thread["metadata"].get("owner"), "child_thread": thread["thread_id"]}


_GRAPH = (
    StateGraph(_State)
    .add_node("call", _call_own_server)
    .add_edge(START, "call")
    .add_edge("call", END)
).compile(name="loopback")


@pytest.fixture
def app() -> Starlette:
    return create_app({"loopback": _GRAPH}, auth=_load_auth())


def _as(app: Starlette, headers: dict[str, str]) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://fathom.local", headers=headers
    )


async def test_a_run_calls_its_own_app_as_the_user_who_started_it(app: Starlette) -> None:
    async with _as(app, {"Authorization": "Bearer bob-token"}) as bob:
        answer = await bob.post("/runs/wait", json={"assistant_id": "loopback", "input": {}})
        assert answer.status_code == 200, answer.text
        values = answer.json()
        child = await bob.get(f"/threads/{values['child_thread']}")

    assert values["owner"] == "bob"
    assert child.status_code == 200
    assert child.json()["metadata"]["owner"] == "bob"


async def test_outside_a_run_the_loopback_client_has_no_user_and_others_need_a_token(
    app: Starlette,
) -> None:
    plain = in_process_client(app)
    async with _as(app, {LOOPBACK_HEADER: "guessed"}) as forged:
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await plain.threads.create()
        forged_answer = await forged.post("/threads", json={})
    await plain.http.client.aclose()

    assert refused.value.response.status_code == 401
    assert forged_answer.status_code == 401


async def test_under_an_api_key_a_runs_loopback_call_needs_no_key() -> None:
    keyed = create_app({"loopback": _GRAPH}, api_key="k3y")
    async with _as(keyed, {"x-api-key": "k3y"}) as caller:
        answer = await caller.post("/runs/wait", json={"assistant_id": "loopback", "input": {}})
    async with _as(keyed, {LOOPBACK_HEADER: "guessed"}) as forged:
        refused = await forged.post("/threads", json={})

    assert answer.status_code == 200, answer.text
    assert answer.json()["owner"] is None  # no custom auth: no owner
    assert refused.status_code == 401
