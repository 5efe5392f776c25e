"""``@auth.on`` handlers: may this caller do this action on this resource, and on which records?

Route code calls `authorize(request, resource, action, value)` once per request, before it
touches storage. The most specific handler registered for ``(resource, action)`` runs (then
``(resource, "*")``, ``("*", action)``, ``("*", "*")``, as langgraph-api chooses), with an
``AuthContext`` (user, permissions, resource, action) and ``value``, the request's data as a
dict that the handler may change (``value["metadata"]["owner"] = ...`` on create). Its answer:
None or True allows, False is 403, a dict is a filter (`fathom.server.auth.filters`) that the
route applies to the records' metadata: records that do not pass are unknown to this caller
(404 on reads, left out of searches). ``Auth.exceptions.HTTPException`` keeps its status;
an ``AssertionError`` is 403, as in langgraph-api.

Without custom auth, or without an authenticate handler, `authorize` allows everything and
returns None.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from langgraph_sdk import Auth
from langgraph_sdk.auth.types import AuthContext
from starlette.requests import HTTPConnection

from fathom.server.auth.authenticate import auth_state
from fathom.server.auth.users import AuthUser
from fathom.server.errors import ApiError

__all__ = ["Filter", "Forbidden", "authorize", "request_user"]

Filter = Mapping[str, Any]


class Forbidden(ApiError):
    """An authorization handler refused the action (403)."""

    status = 403


def _handler(auth: Auth, resource: str, action: str) -> Any:
    handlers = auth._handlers  # pyright: ignore[reportPrivateUsage]
    for key in ((resource, action), (resource, "*"), ("*", action), ("*", "*")):
        if handlers.get(key):
            return handlers[key][-1]
    globals_ = auth._global_handlers  # pyright: ignore[reportPrivateUsage]
    return globals_[-1] if globals_ else None


def request_user(request: HTTPConnection) -> tuple[AuthUser, tuple[str, ...]] | None:
    """The authenticated caller and their permissions, or None without custom auth."""
    state = auth_state(request)
    if state is None or state.user is None:
        return None
    return state.user, tuple(state.permissions)


async def authorize(
    request: HTTPConnection, resource: str, action: str, value: dict[str, Any]
) -> Filter | None:
    """Run the handler for ``resource``/``action``; the filter it returns, or None (see above).

    ``value`` may be changed by the handler; the route reads its fields back afterwards.
    """
    state = auth_state(request)
    if state is None or state.user is None:
        return None
    handler = _handler(state.auth, resource, action)
    if handler is None:
        return None
    ctx = AuthContext(
        permissions=list(state.permissions),
        user=state.user,  # pyright: ignore[reportArgumentType]
        resource=resource,  # pyright: ignore[reportArgumentType]
        action=action,  # pyright: ignore[reportArgumentType]
    )
    try:
        result = handler(ctx=ctx, value=value)
        if inspect.isawaitable(result):
            result = await result
    except Auth.exceptions.HTTPException as error:
        raise ApiError(str(error.detail or "Forbidden"), error.status_code) from None
    except AssertionError as error:
        raise Forbidden(str(error) or "Forbidden") from None
    if result is None or result is True:
        return None
    if result is False:
        raise Forbidden("Forbidden")
    if not isinstance(result, Mapping):
        raise ApiError(
            f"the auth handler for {resource}.{action} returned a {type(result).__name__}; "
            "expected None, a bool or a filter dict",
            500,
        )
    return result  # pyright: ignore[reportUnknownVariableType]
