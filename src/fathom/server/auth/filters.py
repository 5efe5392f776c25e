"""Authorization filters: the dict an ``@auth.on`` handler returns, matched against metadata.

``{"owner": "alice"}`` (equality), ``{"owner": {"$eq": "alice"}}``, ``{"tags": {"$contains":
"x"}}`` (the list holds the value, or every value of a list), and ``$or`` / ``$and`` over lists of
at least two filters, nested at most two deep: the operators langgraph-api supports. A record
passes when every condition holds; a malformed filter is the handler's bug, reported as 500.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fathom.server.errors import ApiError

__all__ = ["BadFilter", "matches_filter"]

_MAX_NESTING = 2


class BadFilter(ApiError):
    """An auth handler returned a filter this server cannot apply (a bug in the handler)."""

    status = 500


def _groups(filters: Mapping[str, Any], op: str, level: int) -> list[Mapping[str, Any]]:
    groups = filters[op]
    if (
        not isinstance(groups, list)
        or len(groups) < 2
        or not all(isinstance(g, Mapping) for g in groups)
    ):
        raise BadFilter(f"an auth handler returned a filter whose {op} is not a list of at "
                        "least 2 filter objects")  # fmt: skip
    for group in groups:
        _check_depth(group, level + 1)
    return groups


def _check_depth(filters: Mapping[str, Any], level: int) -> None:
    if level > _MAX_NESTING:
        raise BadFilter("an auth handler returned a filter nested more than 2 levels deep")
    for op in ("$or", "$and"):
        if op in filters:
            _groups(filters, op, level)


def _condition(metadata: Mapping[str, Any], key: str, expected: Any) -> bool:
    if not isinstance(expected, Mapping):
        return key in metadata and metadata[key] == expected
    if len(expected) != 1:
        raise BadFilter(f"an auth handler's filter on {key!r} must have exactly one operator")
    op, value = next(iter(expected.items()))
    if op == "$eq":
        return key in metadata and metadata[key] == value
    if op == "$contains":
        held = metadata.get(key)
        if not isinstance(held, list):
            return False
        wanted = value if isinstance(value, list) else [value]
        return all(item in held for item in wanted)
    raise BadFilter(f"an auth handler's filter on {key!r} uses {op!r}; supported: $eq, $contains")


def matches_filter(
    metadata: Mapping[str, Any], filters: Mapping[str, Any] | None, level: int = 0
) -> bool:
    """Whether ``metadata`` passes ``filters`` (None or empty: everything passes)."""
    if not filters:
        return True
    _check_depth(filters, level)
    if "$or" in filters and not any(
        matches_filter(metadata, g, level + 1) for g in _groups(filters, "$or", level)
    ):
        return False
    if "$and" in filters and not all(
        matches_filter(metadata, g, level + 1) for g in _groups(filters, "$and", level)
    ):
        return False
    return all(
        _condition(metadata, key, expected)
        for key, expected in filters.items()
        if key not in ("$or", "$and")
    )
