"""Which fathom app hosts the graph running now, so a graph can call its own server in process.

`create_app` registers every app it builds. While an app handles a request, the app is
the current one in that request's context. A run's task starts in a fresh context that
carries only that (`run_context`), so code inside a run (an async subagent tool) finds the
app that hosts it, even with several apps in one process, while nothing else of the caller's
context leaks in: a run started in process from inside another run must not inherit that
run's LangGraph config and stream callbacks.
"""

from __future__ import annotations

import contextvars
import weakref
from typing import Any

from starlette.applications import Starlette
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["hosting_app", "register_app", "run_context"]

_current: contextvars.ContextVar[Starlette | None] = contextvars.ContextVar(
    "fathom_hosting_app", default=None
)
_apps: weakref.WeakSet[Starlette] = weakref.WeakSet()


class _MarkHostingApp:
    """ASGI middleware: makes the app the current one while it handles a request."""

    def __init__(self, app: ASGIApp, owner: Any) -> None:
        self.app = app
        self.owner = owner

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        token = _current.set(self.owner)
        try:
            await self.app(scope, receive, send)
        finally:
            _current.reset(token)


def register_app(app: Starlette) -> None:
    """Register `app` as a fathom app (called by `create_app`, before the app starts)."""
    app.add_middleware(_MarkHostingApp, owner=app)
    _apps.add(app)


def hosting_app() -> Starlette | None:
    """The fathom app hosting the current run, else the only fathom app in this process.

    `None` when no fathom app exists, or several do and none is handling this code.
    """
    current = _current.get()
    if current is not None:
        return current
    apps = list(_apps)
    return apps[0] if len(apps) == 1 else None


def run_context() -> contextvars.Context:
    """A fresh context for a run's task that carries only the current hosting app."""
    context = contextvars.Context()
    context.run(_current.set, _current.get())
    return context
