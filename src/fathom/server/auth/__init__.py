"""Caller identity for ``fathom serve``: a deployment's ``langgraph_sdk.Auth``, as langgraph-api.

- `AuthMiddleware` (`authenticate`): the ``@auth.authenticate`` handler names the caller of
  every API request.
- `authorize` (`authorize`): the ``@auth.on...`` handler for a route's resource and action
  allows, refuses (403) or returns a filter; `matches_filter` (`filters`) applies it.
- `AuthUser` (`users`): the user as the handlers and the graph (``runtime.server_info.user``)
  see it, stored in run records as a plain dict; `attach_identity` (`run_config`) puts it into a
  run's ``configurable`` and rebuilds it where the run executes.

Layer: server; it must not import protocols or cli. Its modules import no route module and
not the server object (``guards`` excepted, which ``__init__`` does not import), so the run
executor may use `run_config`.
"""

from fathom.server.auth.authenticate import AuthMiddleware, AuthState, auth_state
from fathom.server.auth.authorize import Filter, Forbidden, authorize, request_user
from fathom.server.auth.filters import BadFilter, matches_filter
from fathom.server.auth.run_config import AUTH_CONFIG_KEYS, attach_identity, rebuild_identity
from fathom.server.auth.users import AuthUser, BadUserError, normalize_user

__all__ = [
    "AUTH_CONFIG_KEYS",
    "AuthMiddleware",
    "AuthState",
    "AuthUser",
    "BadFilter",
    "BadUserError",
    "Filter",
    "Forbidden",
    "attach_identity",
    "auth_state",
    "authorize",
    "matches_filter",
    "normalize_user",
    "rebuild_identity",
    "request_user",
]
