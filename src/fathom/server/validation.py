"""Parsing and checking of request bodies, query parameters and ids.

Ids (thread, run, assistant) must be a UUID or match ``[A-Za-z0-9_-]{1,128}``; anything else
(dots, slashes, spaces, empty) is refused with 422 before it reaches storage.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from starlette.requests import Request

from fathom.server.errors import Unprocessable

__all__ = [
    "ID_PATTERN",
    "check_id",
    "opt_bool",
    "opt_dict",
    "opt_enum",
    "opt_int",
    "opt_str",
    "opt_str_list",
    "query_bool",
    "query_int",
    "read_json",
]

ID_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,128}")


def check_id(value: str, kind: str) -> str:
    """Return ``value`` if it is a valid id of ``kind`` ("thread", "run"...), else raise 422."""
    try:
        return str(uuid.UUID(value))
    except (ValueError, AttributeError, TypeError):
        pass
    if isinstance(value, str) and ID_PATTERN.fullmatch(value):
        return value
    raise Unprocessable(
        f"Invalid {kind} ID {value!r}: must be a UUID or 1-128 letters, digits, '_' or '-'"
    )


async def read_json(request: Request, *, allow_empty: bool = True) -> dict[str, Any]:
    """The request body as a JSON object; 422 for invalid JSON or a non-object body."""
    raw = await request.body()
    if not raw.strip():
        if allow_empty:
            return {}
        raise Unprocessable("Request body is required")
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise Unprocessable(f"Invalid JSON in request body: {exc}") from None
    if data is None and allow_empty:
        return {}
    if not isinstance(data, dict):
        raise Unprocessable("Request body must be a JSON object")
    return data


def opt_str(body: Mapping[str, Any], key: str) -> str | None:
    """``body[key]`` if it is a string or absent/null; 422 otherwise."""
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        raise Unprocessable(f"'{key}' must be a string")
    return value


def opt_dict(body: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    """``body[key]`` if it is an object or absent/null; 422 otherwise."""
    value = body.get(key)
    if value is not None and not isinstance(value, dict):
        raise Unprocessable(f"'{key}' must be an object")
    return value


def opt_bool(body: Mapping[str, Any], key: str, default: bool = False) -> bool:
    """``body[key]`` as a boolean (``default`` when absent); 422 for other types."""
    value = body.get(key)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise Unprocessable(f"'{key}' must be a boolean")
    return value


def opt_int(body: Mapping[str, Any], key: str, default: int, *, minimum: int = 0) -> int:
    """``body[key]`` as an int >= ``minimum`` (``default`` when absent); 422 otherwise."""
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise Unprocessable(f"'{key}' must be an integer >= {minimum}")
    return value


def opt_enum(body: Mapping[str, Any], key: str, choices: Sequence[str], default: str) -> str:
    """``body[key]`` if it is one of ``choices`` (``default`` when absent); 422 otherwise."""
    value = body.get(key)
    if value is None:
        return default
    if value not in choices:
        raise Unprocessable(f"'{key}' must be one of {', '.join(choices)}; got {value!r}")
    return value


def opt_str_list(body: Mapping[str, Any], key: str) -> list[str] | None:
    """``body[key]`` as a list of strings (a single string becomes a one-item list)."""
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise Unprocessable(f"'{key}' must be a string or a list of strings")
    return list(value)


def query_int(request: Request, key: str, default: int, *, minimum: int = 0) -> int:
    """Query parameter ``key`` as an int >= ``minimum``; 422 otherwise."""
    raw = request.query_params.get(key)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise Unprocessable(f"Query parameter '{key}' must be an integer") from None
    if value < minimum:
        raise Unprocessable(f"Query parameter '{key}' must be >= {minimum}")
    return value


def query_bool(request: Request, key: str, default: bool = False) -> bool:
    """Query parameter ``key`` as a boolean (1/0, true/false)."""
    raw = request.query_params.get(key)
    if raw is None or raw == "":
        return default
    if raw.lower() in ("1", "true", "yes"):
        return True
    if raw.lower() in ("0", "false", "no"):
        return False
    raise Unprocessable(f"Query parameter '{key}' must be a boolean")
