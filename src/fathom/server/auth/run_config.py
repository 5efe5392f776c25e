"""The caller's identity in a run's config, as langgraph-api puts it there.

``configurable["langgraph_auth_user"]`` (the user), ``["langgraph_auth_user_id"]`` (its
identity) and ``["langgraph_auth_permissions"]``. A client cannot set these: `attach_identity`
drops whatever the request body put there. The run record is JSON, so it holds the user as a
dict; `rebuild_identity`, where the run executes, turns it back into an `AuthUser`, which
LangGraph exposes to nodes and tools as ``runtime.server_info.user``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fathom.server.auth.users import AuthUser, BadUserError

__all__ = ["AUTH_CONFIG_KEYS", "Identity", "attach_identity", "rebuild_identity"]

Identity = tuple[AuthUser, Sequence[str]]
"""A caller: the user and their permissions (what the authenticate handler answered)."""

AUTH_CONFIG_KEYS = ("langgraph_auth_user", "langgraph_auth_user_id", "langgraph_auth_permissions")


def attach_identity(config: dict[str, Any], identity: Identity | None) -> None:
    """Replace the identity keys of ``config["configurable"]`` with the caller's (or none)."""
    configurable = dict(config.get("configurable") or {})
    for key in AUTH_CONFIG_KEYS:
        configurable.pop(key, None)
    if identity is not None:
        user, permissions = identity
        configurable["langgraph_auth_user"] = user.to_dict()
        configurable["langgraph_auth_user_id"] = user.identity
        configurable["langgraph_auth_permissions"] = list(permissions)
    if configurable or "configurable" in config:
        config["configurable"] = configurable


def rebuild_identity(configurable: dict[str, Any]) -> None:
    """Turn a stored user dict in ``configurable`` back into an `AuthUser`, in place."""
    stored = configurable.get("langgraph_auth_user")
    if isinstance(stored, dict):
        try:
            configurable["langgraph_auth_user"] = AuthUser(stored)
        except BadUserError:
            configurable.pop("langgraph_auth_user", None)
