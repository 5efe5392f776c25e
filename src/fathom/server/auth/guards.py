"""The record checks routes share: a thread, run or assistant this caller may see, or 404.

A record an authorization filter hides is answered exactly like one that does not exist, so a
caller learns nothing about other users' ids. (Not imported by ``fathom.server.auth`` itself:
it needs the server object, which the run executor below it must not import.)
"""

from __future__ import annotations

from typing import Any

from starlette.requests import HTTPConnection

from fathom.server.auth.authorize import Filter, authorize
from fathom.server.auth.filters import matches_filter
from fathom.server.context import FathomServer
from fathom.server.errors import NotFound

__all__ = ["run_visible", "thread_visible", "visible_assistant", "visible_thread"]


def thread_visible(thread: dict[str, Any] | None, flt: Filter | None) -> bool:
    """Whether ``thread`` passes ``flt`` (a missing thread passes only when there is no filter)."""
    if flt is None:
        return True
    return thread is not None and matches_filter(thread.get("metadata") or {}, flt)


def run_visible(run: dict[str, Any], thread: dict[str, Any] | None, flt: Filter | None) -> bool:
    """Whether ``run`` passes ``flt``: by its thread, or by its own metadata once a stateless
    run's temporary thread is gone (the ``create_run`` handler's owner is there too)."""
    if flt is None:
        return True
    record = thread if thread is not None else {"metadata": run.get("metadata") or {}}
    return thread_visible(record, flt)


async def visible_thread(
    server: FathomServer,
    request: HTTPConnection,
    thread_id: str,
    action: str = "read",
    value: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The thread record, after the ``threads`` handler for ``action`` allowed it; else 404.

    ``value`` is what the handler sees (``thread_id`` is added); 422 for a malformed id.
    """
    thread = await server.thread(thread_id)
    flt = await authorize(
        request, "threads", action, {"thread_id": thread["thread_id"], **(value or {})}
    )
    if not thread_visible(thread, flt):
        raise NotFound(f"Thread with ID {thread['thread_id']} not found")
    return thread


async def visible_assistant(
    server: FathomServer,
    request: HTTPConnection,
    assistant_id: str,
    action: str = "read",
    value: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The assistant record, after the ``assistants`` handler for ``action`` allowed it; 404."""
    assistant = await server.assistant(assistant_id)
    flt = await authorize(
        request,
        "assistants",
        action,
        {"assistant_id": assistant["assistant_id"], **(value or {})},
    )
    if flt is not None and not matches_filter(assistant.get("metadata") or {}, flt):
        raise NotFound(f"Assistant {assistant_id!r} not found")
    return assistant
