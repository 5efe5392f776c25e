"""The authenticate handler's contract, in process: what it is passed, and what its errors become.

Every other auth test goes through a real `fathom serve`; these call `create_app(auth=...)`
over `httpx.ASGITransport`, so that each parameter langgraph-api injects by name can be
checked against the request that carried it.
"""

from __future__ import annotations

from typing import Any, TypedDict

import httpx
from langgraph.graph import END, START, StateGraph
from langgraph_sdk import Auth
from starlette.requests import Request

from fathom.server import create_app


class _State(TypedDict, total=False):
    n: int


_GRAPH = (
    StateGraph(_State)
    .add_node("step", lambda state: {"n": 1})
    .add_edge(START, "step")
    .add_edge("step", END)
).compile()

seen: list[dict[str, Any]] = []


def _auth() -> Auth:
    auth = Auth()

    @auth.authenticate
    async def authenticate(
        request: Request,
        authorization: str | None,
        headers: dict[bytes, bytes],
        path: str,
        method: str,
        query_params: Any,
        path_params: dict[str, str] | None,
        scopes: list[str],
        scope: dict[str, Any],
    ) -> Any:
        seen.append({
            "request_path": request.url.path, "authorization": authorization,
            "header": headers.get(b"x-team"), "path": path, "method": method,
            "query": query_params.get("q"), "path_params": path_params, "scopes": scopes,
            "scope_type": scope["type"],
        })  # fmt: skip
        if authorization is None:
            raise Auth.exceptions.HTTPException(status_code=401, detail="who are you?")
        if authorization == "Bearer boom":
            raise RuntimeError("the handler's own bug")
        if authorization == "Bearer nobody":
            return 42
        if authorization == "Bearer teapot":
            raise Auth.exceptions.HTTPException(status_code=418, detail="short and stout")
        return {"identity": "carol", "permissions": ["p1"]}

    @auth.on.threads.create
    async def refuse_by_assert(ctx: Auth.types.AuthContext, value: Any) -> None:
        assert "threads:create" in ctx.permissions, "needs threads:create"

    return auth


def _client(headers: dict[str, str]) -> httpx.AsyncClient:
    app = create_app({"g": _GRAPH}, auth=_auth())
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://fathom.local", headers=headers
    )


async def test_the_handler_gets_the_parameters_it_names() -> None:
    seen.clear()
    async with _client({"Authorization": "Bearer ok", "x-team": "red"}) as http:
        answer = await http.get("/threads/00000000-0000-0000-0000-000000000001?q=find")

    assert answer.status_code == 404  # authenticated, then an unknown thread
    assert seen == [{
        "request_path": "/threads/00000000-0000-0000-0000-000000000001",
        "authorization": "Bearer ok", "header": b"red",
        "path": "/threads/00000000-0000-0000-0000-000000000001", "method": "GET",
        "query": "find", "path_params": {}, "scopes": [], "scope_type": "http",
    }]  # fmt: skip


async def test_handler_errors_become_statuses_with_a_json_detail() -> None:
    statuses: dict[str, tuple[int, str]] = {}
    for token in ("teapot", "boom", "nobody"):
        async with _client({"Authorization": f"Bearer {token}"}) as http:
            answer = await http.post("/threads/search", json={})
        statuses[token] = (answer.status_code, answer.json()["detail"])

    assert statuses["teapot"] == (418, "short and stout")
    assert statuses["boom"][0] == 500 and "the handler's own bug" not in statuses["boom"][1]
    assert statuses["nobody"][0] == 500 and "identity" in statuses["nobody"][1]


async def test_an_assertion_in_an_authorization_handler_is_403_and_creates_nothing() -> None:
    async with _client({"Authorization": "Bearer ok"}) as http:
        refused = await http.post("/threads", json={"metadata": {"k": "v"}})
        listed = await http.post("/threads/search", json={})

    assert refused.status_code == 403
    assert refused.json()["detail"].startswith("needs threads:create")
    assert listed.status_code == 200 and listed.json() == []


async def test_ok_needs_no_credentials() -> None:
    async with _client({}) as http:
        ok = await http.get("/ok")
        refused = await http.post("/threads/search", json={})

    assert ok.status_code == 200
    assert (refused.status_code, refused.json()["detail"]) == (401, "who are you?")
