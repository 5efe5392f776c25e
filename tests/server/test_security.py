"""The server's HTTP guards on a tiny Starlette app: API key, CORS, and the body limit.

Most tests go through `httpx.ASGITransport`; the chunked-upload test uses real HTTP (uvicorn
on a free loopback port) so that the body really arrives without a `Content-Length`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from fathom.server.security import security_middleware

KEY = "s3cret-key"
LIMIT = 1000


async def echo(request: Request) -> JSONResponse:
    body = await request.body()
    return JSONResponse({"received": len(body)})


async def swallow_errors(request: Request) -> JSONResponse:
    """An endpoint that turns any body error into its own 422, as careless apps do."""
    try:
        await request.body()
    except Exception:
        return JSONResponse({"detail": "bad body"}, status_code=422)
    return JSONResponse({"ok": True})


async def ok(request: Request) -> JSONResponse:
    return JSONResponse({"ok": True})


def make_app(*, api_key: str | None = None, cors_origins: tuple[str, ...] = ()) -> Starlette:
    return Starlette(
        routes=[
            Route("/ok", ok),
            Route("/echo", echo, methods=["POST"]),
            Route("/swallow", swallow_errors, methods=["POST"]),
        ],
        middleware=security_middleware(
            api_key=api_key, cors_origins=cors_origins, max_body_bytes=LIMIT
        ),
    )


def client_for(app: Starlette, **kwargs: object) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test",
                             **kwargs)  # type: ignore[arg-type]  # fmt: skip


async def test_without_a_key_configured_every_request_is_served():
    async with client_for(make_app()) as client:
        response = await client.post("/echo", content=b"x" * 10)
    assert response.status_code == 200
    assert response.json() == {"received": 10}


async def test_a_request_without_the_key_gets_401_naming_the_header():
    async with client_for(make_app(api_key=KEY)) as client:
        response = await client.post("/echo", content=b"hi")
    assert response.status_code == 401
    assert "x-api-key" in response.json()["detail"]
    assert response.headers["www-authenticate"].startswith("Bearer")


async def test_a_wrong_key_gets_403_in_either_header():
    async with client_for(make_app(api_key=KEY)) as client:
        wrong_header = await client.post("/echo", headers={"x-api-key": "nope"})
        wrong_bearer = await client.post("/echo", headers={"authorization": "Bearer nope"})
    assert wrong_header.status_code == 403
    assert wrong_bearer.status_code == 403
    assert "x-api-key" in wrong_header.json()["detail"]


async def test_the_key_is_accepted_as_x_api_key_or_as_a_bearer_token():
    async with client_for(make_app(api_key=KEY)) as client:
        by_header = await client.post("/echo", content=b"abc", headers={"x-api-key": KEY})
        by_bearer = await client.post("/echo", content=b"abc",
                                      headers={"Authorization": f"Bearer {KEY}"})  # fmt: skip
    assert by_header.status_code == 200
    assert by_bearer.status_code == 200
    assert by_bearer.json() == {"received": 3}


async def test_a_non_bearer_authorization_scheme_is_not_taken_for_the_key():
    async with client_for(make_app(api_key=KEY)) as client:
        response = await client.post("/echo", headers={"Authorization": f"Basic {KEY}"})
    assert response.status_code == 401


async def test_the_health_check_answers_without_a_key():
    async with client_for(make_app(api_key=KEY)) as client:
        response = await client.get("/ok")
    assert response.status_code == 200


async def test_cors_preflight_is_answered_for_an_allowed_origin_without_a_key():
    app = make_app(api_key=KEY, cors_origins=("https://ui.example",))
    async with client_for(app) as client:
        preflight = await client.options("/echo", headers={
            "origin": "https://ui.example",
            "access-control-request-method": "POST",
            "access-control-request-headers": "x-api-key,content-type",
        })  # fmt: skip
        refused = await client.post("/echo", headers={"origin": "https://ui.example"})
        other = await client.options("/echo", headers={
            "origin": "https://evil.example", "access-control-request-method": "POST",
        })  # fmt: skip
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == "https://ui.example"
    # A refusal still carries CORS headers, so the browser page can read why.
    assert refused.status_code == 401
    assert refused.headers["access-control-allow-origin"] == "https://ui.example"
    assert other.status_code == 400
    assert "access-control-allow-origin" not in other.headers


async def test_without_cors_origins_no_cors_headers_are_sent():
    async with client_for(make_app()) as client:
        response = await client.post("/echo", headers={"origin": "https://ui.example"})
    assert response.status_code == 200
    assert "access-control-allow-origin" not in response.headers


async def test_a_body_over_the_limit_with_content_length_gets_413_json():
    async with client_for(make_app()) as client:
        at_limit = await client.post("/echo", content=b"x" * LIMIT)
        over = await client.post("/echo", content=b"x" * (LIMIT + 1))
    assert at_limit.status_code == 200
    assert over.status_code == 413
    assert str(LIMIT) in over.json()["detail"]


async def _chunks(total: int, size: int = 300) -> AsyncIterator[bytes]:
    sent = 0
    while sent < total:
        piece = min(size, total - sent)
        sent += piece
        yield b"y" * piece


async def test_a_streamed_body_over_the_limit_gets_413_even_if_the_app_catches_the_error():
    async with client_for(make_app()) as client:
        response = await client.post("/swallow", content=_chunks(LIMIT * 5))
        small = await client.post("/swallow", content=_chunks(LIMIT - 1))
    assert "content-length" not in response.request.headers
    assert response.status_code == 413
    assert "limit" in response.json()["detail"]
    assert small.status_code == 200


@pytest.fixture
async def served_url() -> AsyncIterator[str]:
    """The tiny app on real HTTP: uvicorn on a free loopback port, in this event loop."""
    config = uvicorn.Config(make_app(), host="127.0.0.1", port=0, log_level="warning",
                            lifespan="off")  # fmt: skip
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    deadline = asyncio.get_running_loop().time() + 60
    while not server.started:
        assert not task.done(), "uvicorn stopped before it started"
        assert asyncio.get_running_loop().time() < deadline, "uvicorn did not start"
        await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


async def _raw_chunked_post(url: str, total: int) -> bytes:
    """POST a chunked body over a plain socket, all of it sent before the answer is read.

    (An HTTP client library that interleaves sending with the server's early answer may see
    the connection reset instead of the 413; a raw socket shows exactly what the server says.)
    """
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(b"POST /echo HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n")
    async for chunk in _chunks(total):
        writer.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
    writer.write(b"0\r\n\r\n")
    await writer.drain()
    answer = await reader.read()  # the server closes the connection after a 413
    writer.close()
    return answer


async def test_a_chunked_upload_without_content_length_is_stopped_at_the_limit_over_http(
    served_url: str,
):
    answer = await _raw_chunked_post(served_url, LIMIT * 3)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413")
    assert b"content-type: application/json" in head.lower()
    assert json.loads(body)["detail"].endswith(f"limit of {LIMIT} bytes")
    async with httpx.AsyncClient(base_url=served_url) as client:
        under = await client.post("/echo", content=_chunks(LIMIT))
    assert under.request.headers.get("transfer-encoding") == "chunked"
    assert under.status_code == 200
    assert under.json() == {"received": LIMIT}
