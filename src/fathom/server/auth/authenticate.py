"""``@auth.authenticate`` on every API request: the ASGI middleware that names the caller.

The middleware calls the deployment's authenticate handler with the parameters it declares,
by name, as langgraph-api injects them: ``request`` (a Starlette `Request`), ``scope``,
``path``, ``method``, ``headers`` (``dict[bytes, bytes]``), ``authorization`` (the header's
value or None), ``query_params``, ``path_params`` (empty: authentication runs before routing),
``scopes`` and ``user`` (none yet). The result (see `fathom.server.auth.users`) is kept in the
request's scope as an `AuthState` for the authorization handlers and the runs the request
starts. ``Auth.exceptions.HTTPException`` raised by the handler becomes that status with
``{"detail": ...}``; any other error is the handler's bug: logged, answered 500.

`OPEN_PATHS` (``/ok`` and the web page's static shell) skip authentication, as they skip the
API key; CORS preflights never reach here (the CORS middleware answers them outside).

Loopback calls: code inside one of the app's runs (an async subagent without a url, the parent
notifier) calls the app in process with ``fathom.hosting.client.in_process_client(app,
loopback=True)``, which sends the app's secret ``loopback_token`` in ``x-fathom-loopback``.
Such a request does not go through the authenticate handler (it has no credentials of its
own): it acts as the user of the run it is made from, read from that run's LangGraph config
(``langgraph_auth_user``), so a subagent's thread belongs to the user who started the parent.
A loopback call from outside any run has no user, and no handler runs for it.
"""

from __future__ import annotations

import hmac
import inspect
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langgraph_sdk import Auth
from starlette.datastructures import QueryParams
from starlette.requests import HTTPConnection, Request
from starlette.types import ASGIApp, Receive, Scope, Send

from fathom.hosting.client import LOOPBACK_HEADER
from fathom.server.auth.users import AuthUser, BadUserError, normalize_user
from fathom.server.security import OPEN_PATHS, send_json

__all__ = ["SCOPE_KEY", "AuthMiddleware", "AuthState", "auth_state", "check_authenticator"]

logger = logging.getLogger(__name__)

SCOPE_KEY = "fathom.auth"
"""Where a request's `AuthState` lives in its ASGI scope."""

_PARAMETERS = frozenset({
    "request", "scope", "path", "method", "headers", "authorization", "query_params",
    "path_params", "scopes", "user",
})  # fmt: skip


@dataclass(frozen=True)
class AuthState:
    """One request's caller and the deployment's `Auth` whose handlers judge it."""

    auth: Auth
    user: AuthUser | None
    """None when the deployment has no authenticate handler (then no handler runs)."""
    permissions: Sequence[str]


def auth_state(connection: HTTPConnection) -> AuthState | None:
    """The request's `AuthState`, or None when the server has no custom auth."""
    state = connection.scope.get(SCOPE_KEY)
    return state if isinstance(state, AuthState) else None


def check_authenticator(auth: Auth) -> None:
    """Raise `TypeError` naming the parameter if the handler asks for one nobody injects."""
    handler = auth._authenticate_handler  # pyright: ignore[reportPrivateUsage]
    if handler is None:
        return
    for name, parameter in inspect.signature(handler).parameters.items():
        if name not in _PARAMETERS and parameter.default is parameter.empty:
            raise TypeError(
                f"the authenticate handler's parameter {name!r} is not one the server passes; "
                f"use any of: {', '.join(sorted(_PARAMETERS))}"
            )


def _arguments(handler: Any, scope: Scope) -> dict[str, Any]:
    names = set(inspect.signature(handler).parameters) & _PARAMETERS
    headers: dict[bytes, bytes] = dict(scope.get("headers") or [])
    values: dict[str, Any] = {}
    for name in names:
        if name == "request":
            values[name] = Request(scope)
        elif name == "scope":
            values[name] = scope
        elif name == "path":
            values[name] = scope["path"]
        elif name == "method":
            values[name] = scope["method"]
        elif name == "headers":
            values[name] = headers
        elif name == "authorization":
            raw = headers.get(b"authorization")
            values[name] = raw.decode("latin-1") if raw is not None else None
        elif name == "query_params":
            values[name] = QueryParams(scope.get("query_string") or b"")
        elif name == "path_params":
            values[name] = dict(scope.get("path_params") or {})
        elif name == "scopes":
            values[name] = []
        else:  # "user": nobody is authenticated before this handler
            values[name] = None
    return values


async def _send_json(send: Send, status: int, detail: str, headers: dict[str, str]) -> None:
    encoded = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
    await send_json(send, status, {"detail": detail}, encoded)


def _current_run_user() -> AuthUser | None:
    """The user of the LangGraph run this code runs in, if any."""
    from langgraph.config import get_config

    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:  # not inside a run
        return None
    user = configurable.get("langgraph_auth_user")
    return user if isinstance(user, AuthUser) else None


class AuthMiddleware:
    """Runs the deployment's authenticate handler and records the caller in the scope."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        auth: Auth,
        loopback_token: str | None = None,
        open_paths: frozenset[str] = OPEN_PATHS,
    ) -> None:
        check_authenticator(auth)
        self.app = app
        self._auth = auth
        self._loopback = loopback_token.encode() if loopback_token else None
        self._open_paths = open_paths

    def _is_loopback(self, scope: Scope) -> bool:
        if self._loopback is None:
            return False
        name = LOOPBACK_HEADER.encode()
        presented = next((v for k, v in scope.get("headers") or [] if k.lower() == name), None)
        return presented is not None and hmac.compare_digest(presented, self._loopback)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") in self._open_paths:
            await self.app(scope, receive, send)
            return
        if self._is_loopback(scope):
            runner = _current_run_user()
            granted = tuple(runner.permissions) if runner is not None else ()
            scope[SCOPE_KEY] = AuthState(self._auth, runner, granted)
            await self.app(scope, receive, send)
            return
        handler = self._auth._authenticate_handler  # pyright: ignore[reportPrivateUsage]
        user: AuthUser | None = None
        permissions: list[str] = []
        if handler is not None:
            try:
                result = handler(**_arguments(handler, scope))
                if inspect.isawaitable(result):
                    result = await result
                user, permissions = normalize_user(result)
            except Auth.exceptions.HTTPException as error:
                detail = str(error.detail or "Unauthorized")
                await _send_json(send, error.status_code, detail, dict(error.headers or {}))
                return
            except BadUserError as error:
                logger.error("the authenticate handler's result is not a user: %s", error)
                await _send_json(send, 500, f"Authentication failed: {error}", {})
                return
            except Exception:  # boundary: the user's authenticate handler; logged, 500
                logger.exception("the authenticate handler failed on %s", scope.get("path"))
                await _send_json(send, 500, "Authentication failed: the handler raised", {})
                return
        scope[SCOPE_KEY] = AuthState(self._auth, user, tuple(permissions))
        await self.app(scope, receive, send)
