"""What ``POST /threads/search`` answers of each thread: ``select`` and ``extract``.

``select`` lists the thread fields to return (all when absent). ``extract`` maps an alias to
a path into the thread (``values.messages[-1].content``: dots for keys, brackets for list
indexes, negative ones counting from the end), rooted at ``values``, ``metadata``,
``config`` or ``interrupts``; the values come back under ``extracted``, None where a path
does not resolve. Both are checked as langgraph-api checks them: at most 10 paths, aliases
that are identifiers and are not thread field names, known roots.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from fathom.server.errors import Unprocessable

__all__ = ["THREAD_FIELDS", "parse_extract", "parse_select", "project"]

THREAD_FIELDS = (
    "thread_id",
    "created_at",
    "updated_at",
    "state_updated_at",
    "metadata",
    "config",
    "status",
    "values",
    "interrupts",
)
_EXTRACT_ROOTS = ("values", "metadata", "config", "interrupts")
_MAX_EXTRACT = 10
_ALIAS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STEP = re.compile(r"\.([^.\[\]]+)|\[(-?\d+)\]")


def parse_select(body: Mapping[str, Any]) -> list[str] | None:
    """``body["select"]``: a list of thread field names, or None for all fields; 422 otherwise."""
    select = body.get("select")
    if not select:
        return None
    if not isinstance(select, list) or not all(isinstance(f, str) for f in select):
        raise Unprocessable("'select' must be a list of thread field names")
    unknown = [f for f in select if f not in THREAD_FIELDS]
    if unknown:
        raise Unprocessable(
            f"'select' has unknown fields {unknown}; expected some of {', '.join(THREAD_FIELDS)}"
        )
    return select


def _steps(path: str) -> list[str | int] | None:
    """The keys and indexes after the root of ``path``, or None if it is malformed."""
    root = re.match(r"[^.\[\]]+", path)
    if root is None:
        return None
    steps: list[str | int] = [root.group(0)]
    at = root.end()
    while at < len(path):
        step = _STEP.match(path, at)
        if step is None:
            return None
        key, index = step.groups()
        steps.append(key if key is not None else int(index))
        at = step.end()
    return steps


def parse_extract(body: Mapping[str, Any]) -> dict[str, list[str | int]] | None:
    """``body["extract"]`` as alias -> path steps, or None; 422 naming the bad alias or path."""
    extract = body.get("extract")
    if not extract:
        return None
    if not isinstance(extract, dict):
        raise Unprocessable("'extract' must be an object mapping aliases to paths")
    if len(extract) > _MAX_EXTRACT:
        raise Unprocessable(f"'extract' allows at most {_MAX_EXTRACT} paths, got {len(extract)}")
    parsed: dict[str, list[str | int]] = {}
    for alias, path in extract.items():
        if not _ALIAS.fullmatch(alias) or alias in THREAD_FIELDS:
            raise Unprocessable(
                f"'extract' alias {alias!r} must be an identifier (letters, digits, '_') "
                "that is not a thread field name"
            )
        steps = _steps(path) if isinstance(path, str) else None
        if steps is None or steps[0] not in _EXTRACT_ROOTS:
            raise Unprocessable(
                f"'extract' path {path!r} for {alias!r} must be like 'values.key[0].key' and "
                f"start with one of {', '.join(_EXTRACT_ROOTS)}"
            )
        parsed[alias] = steps
    return parsed


def _follow(value: Any, steps: list[str | int]) -> Any:
    for step in steps:
        if isinstance(step, int):
            if not isinstance(value, list) or not -len(value) <= step < len(value):
                return None
            value = value[step]
        elif isinstance(value, dict) and not step.startswith("_"):
            value = value.get(step)
        else:
            return None
    return value


def project(
    thread: dict[str, Any],
    select: list[str] | None,
    extract: dict[str, list[str | int]] | None,
) -> dict[str, Any]:
    """The thread as search answers it: its ``select`` fields, plus ``extracted``."""
    out = {k: v for k, v in thread.items() if k in select} if select else dict(thread)
    if extract:
        out["extracted"] = {
            alias: _follow(thread.get(str(steps[0])), steps[1:]) for alias, steps in extract.items()
        }
    return out
