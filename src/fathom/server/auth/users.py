"""The authenticated user: what an ``@auth.authenticate`` handler returns, made one type.

A handler may return an identity string, a dict with ``identity`` (and ``permissions``,
``display_name``, ``is_authenticated`` or anything else), an object with an ``identity``
attribute, or a ``(permissions, user)`` tuple, as langgraph-api accepts. `normalize_user` turns
each into an `AuthUser` and the permissions list.

`AuthUser` answers both attribute and dict access (``user.identity``, ``user["identity"]``),
which is what LangGraph's ``runtime.server_info.user`` and auth handlers' ``ctx.user`` are
used with. Runs are stored as JSON, so a run carries the user as `AuthUser.to_dict()` and the
place that executes it rebuilds the object with `AuthUser(data)`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, cast

from fathom.errors import FathomError

__all__ = ["AuthUser", "BadUserError", "normalize_user"]


class BadUserError(FathomError):
    """An authenticate handler returned something that names no user."""


class AuthUser(Mapping[str, Any]):
    """An authenticated user: ``identity`` plus whatever fields the handler returned."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        identity = data.get("identity")
        if not isinstance(identity, str) or not identity:
            raise BadUserError("a user needs a non-empty string `identity`")
        self._data: dict[str, Any] = {
            "identity": identity,
            "display_name": data.get("display_name") or identity,
            "is_authenticated": bool(data.get("is_authenticated", True)),
            **{k: v for k, v in data.items() if k not in ("display_name", "is_authenticated")},
        }
        self._data.setdefault("permissions", [])

    @property
    def identity(self) -> str:
        """The user's unique id (what owner metadata and ``langgraph_auth_user_id`` hold)."""
        return str(self._data["identity"])

    @property
    def display_name(self) -> str:
        """A name to show; the identity unless the handler gave one."""
        return str(self._data["display_name"])

    @property
    def is_authenticated(self) -> bool:
        """True unless the handler said otherwise."""
        return bool(self._data["is_authenticated"])

    @property
    def permissions(self) -> list[str]:
        """The user's permissions (also ``ctx.permissions`` in authorization handlers)."""
        return list(self._data.get("permissions") or [])

    def __getattr__(self, name: str) -> Any:
        """Any other field the handler returned, as an attribute (``user.org``)."""
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._data[name]
        except KeyError:
            raise AttributeError(name) from None

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"AuthUser({self._data!r})"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy, for run records."""
        return dict(self._data)


def _fields(user: Any) -> dict[str, Any]:
    if isinstance(user, str):
        return {"identity": user}
    if isinstance(user, Mapping):
        return {str(k): v for k, v in user.items()}
    if hasattr(user, "identity"):
        if callable(dump := getattr(user, "model_dump", None)):
            dumped = cast(dict[str, Any], dump(mode="json"))
            return {**dumped, "identity": user.identity}
        own: dict[str, Any] = dict(getattr(user, "__dict__", {}))
        fields = {k: v for k, v in own.items() if not k.startswith("_")}
        for name in ("identity", "display_name", "is_authenticated", "permissions"):
            if hasattr(user, name):
                fields[name] = getattr(user, name)
        return fields
    raise BadUserError(
        f"the authenticate handler returned a {type(user).__name__}; return an identity string, "
        "a dict with `identity`, or an object with an `identity` attribute"
    )


def normalize_user(result: Any) -> tuple[AuthUser, list[str]]:
    """The user and permissions an authenticate handler's ``result`` stands for."""
    permissions: Sequence[str] | None = None
    user = result
    if isinstance(result, tuple):
        if len(result) != 2:
            raise BadUserError("an authenticate handler's tuple must be (permissions, user)")
        permissions, user = result
    fields = _fields(user)
    granted: Sequence[str] = (
        permissions if permissions is not None else (fields.get("permissions") or [])
    )
    fields["permissions"] = [str(p) for p in granted]
    return AuthUser(fields), list(fields["permissions"])
