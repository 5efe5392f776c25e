"""The server's HTTP guards: API-key check, CORS for browser clients, and a request-body limit.

`security_middleware` returns Starlette `Middleware` entries, outermost first:

1. CORS (Starlette's `CORSMiddleware`), only when origins are given. It is outermost so that
   preflight requests are answered without a key (browsers never send credentials on a
   preflight) and so that 401/413 answers still carry the CORS headers a browser needs to read
   them.
2. The API key, only when one is set. A client sends it as `x-api-key: KEY` (what the LangGraph
   SDK and LangSmith use) or `Authorization: Bearer KEY`. No key: 401; a wrong key: 403; both
   answer JSON `{"detail": ...}` naming the header to send. Keys are compared in constant time.
   `GET /ok` stays open so that load balancers and health checks need no secret; it reveals
   nothing but that the server is up. A call that carries the app's own loopback secret (code
   inside one of its runs calling it in process, `in_process_client(app, loopback=True)`)
   passes too.
3. The body limit: a request whose body exceeds `max_body_bytes` gets 413 with a JSON detail.
   `Content-Length` is checked up front, and the body is counted as it streams, so a chunked
   upload without a length is stopped at the limit too, before the app sees more of it.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Sequence
from typing import Any

from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fathom.errors import FathomError
from fathom.hosting.client import LOOPBACK_HEADER

__all__ = [
    "OPEN_PATHS",
    "ApiKeyMiddleware",
    "BodyLimitMiddleware",
    "security_middleware",
    "send_json",
]

logger = logging.getLogger(__name__)

OPEN_PATHS = frozenset({"/ok", "/", "/ui/app.js", "/ui/app.css", "/ui/pygments.css"})
"""Paths that answer without an API key: health checks, and the web page's shell (no data;
the page asks for the key, see `fathom.server.web`)."""

EXPOSED_HEADERS = ("content-location", "location", "x-pagination-total", "x-pagination-next")
"""Response headers a browser client may read: the SDK follows `Content-Location` to a run."""


async def send_json(send: Send, status: int, body: dict[str, Any],
                     headers: Sequence[tuple[bytes, bytes]] = ()) -> None:  # fmt: skip
    payload = json.dumps(body).encode()
    await send({
        "type": "http.response.start",
        "status": status,
        "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(payload)).encode()),
            *headers,
        ],
    })  # fmt: skip
    await send({"type": "http.response.body", "body": payload})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


class ApiKeyMiddleware:
    """Refuses HTTP requests that do not carry the server's API key (see the module docstring)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        api_key: str,
        open_paths: frozenset[str] = OPEN_PATHS,
        loopback_token: str | None = None,
    ):
        if not api_key:
            raise ValueError("ApiKeyMiddleware needs a non-empty api_key")
        self.app = app
        self._key = api_key.encode()
        self._open_paths = open_paths
        self._loopback = loopback_token.encode() if loopback_token else None

    def _is_loopback(self, scope: Scope) -> bool:
        presented = _header(scope, LOOPBACK_HEADER.encode())
        return (
            self._loopback is not None
            and presented is not None
            and hmac.compare_digest(presented.encode("latin-1"), self._loopback)
        )

    def _presented(self, scope: Scope) -> str | None:
        key = _header(scope, b"x-api-key")
        if key is not None:
            return key.strip()
        authorization = _header(scope, b"authorization")
        if authorization is not None:
            scheme, _, token = authorization.strip().partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope.get("path") in self._open_paths
            or self._is_loopback(scope)
        ):
            await self.app(scope, receive, send)
            return
        presented = self._presented(scope)
        if presented is None:
            await send_json(send, 401, {
                "detail": "this server needs an API key: send it in the `x-api-key` header "
                "(or as `Authorization: Bearer <key>`)"
            }, [(b"www-authenticate", b'Bearer realm="fathom"')])  # fmt: skip
            return
        if not hmac.compare_digest(presented.encode(), self._key):
            logger.info("refused a request to %s with a wrong API key", scope.get("path"))
            await send_json(send, 403, {
                "detail": "the API key is not valid for this server; send the key the server was "
                "started with (--api-key or FATHOM_API_KEY) in the `x-api-key` header"
            })  # fmt: skip
            return
        await self.app(scope, receive, send)


class _BodyTooLarge(FathomError):
    """Raised from `receive` once a request body passes the limit."""


class BodyLimitMiddleware:
    """Answers 413 to request bodies larger than `max_body_bytes`, counted as they stream.

    When the app is still reading the body as it passes the limit, `receive` raises inside
    the app and whatever the app then sends is dropped: the client gets the 413, not the app's
    reaction to a broken body. A response the app had already started cannot be replaced; it is
    cut off instead.
    """

    def __init__(self, app: ASGIApp, *, max_body_bytes: int):
        if max_body_bytes <= 0:
            raise ValueError("max_body_bytes must be positive")
        self.app = app
        self.max_body_bytes = max_body_bytes

    def _detail(self) -> dict[str, str]:
        return {"detail": f"the request body is larger than this server's limit of "
                          f"{self.max_body_bytes} bytes"}  # fmt: skip

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = _header(scope, b"content-length")
        if length is not None and length.strip().isdigit() and int(length) > self.max_body_bytes:
            await send_json(send, 413, self._detail())
            return
        received = 0
        exceeded = False
        started = False

        async def counting_receive() -> Message:
            nonlocal received, exceeded
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    exceeded = True
                    raise _BodyTooLarge
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if exceeded and not started:
                return  # the 413 goes instead
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, guarded_send)
        except Exception:  # boundary: the app's request handler; only a 413 replaces an error
            if not exceeded or started:
                raise  # an error of the app's own, or too late to answer 413
            logger.debug("the app failed on a body over the limit: answered 413", exc_info=True)
        if exceeded and not started:
            await send_json(send, 413, self._detail(), [(b"connection", b"close")])


def security_middleware(
    *,
    api_key: str | None,
    cors_origins: Sequence[str],
    max_body_bytes: int,
    loopback_token: str | None = None,
) -> list[Middleware]:
    """The middleware for `Starlette(middleware=...)`, outermost first (see the module docstring).

    `api_key` None or empty: no key is required (the server should then be bound to loopback;
    `fathom serve` refuses otherwise). `cors_origins`: origins allowed to call from a browser,
    `"*"` for any (then without credentials); empty: no CORS headers at all.
    """
    middleware: list[Middleware] = []
    origins = [origin for origin in cors_origins if origin]
    if origins:
        middleware.append(Middleware(
            CORSMiddleware,
            allow_origins=origins,
            allow_credentials="*" not in origins,
            allow_methods=["*"],
            allow_headers=["*"],
            expose_headers=list(EXPOSED_HEADERS),
        ))  # fmt: skip
    if api_key:
        middleware.append(
            Middleware(ApiKeyMiddleware, api_key=api_key, loopback_token=loopback_token)
        )
    middleware.append(Middleware(BodyLimitMiddleware, max_body_bytes=max_body_bytes))
    return middleware
