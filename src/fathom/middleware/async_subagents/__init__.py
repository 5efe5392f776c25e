"""Async subagents: background runs on Agent Protocol servers, and the parent they wake.

- `middleware`: `AsyncSubAgentMiddleware`, the five task tools' middleware and the refresh
  of unfinished tasks before each model call;
- `tasks`: the `AsyncSubAgent` spec, the `async_tasks` channel and its records;
- `tools`: `start/check/update/cancel/list_async_task(s)`;
- `transport`: one SDK client per server, in process (`fathom.hosting`) or over HTTP;
- `parent_notifier`: the child side, which wakes an idle parent when it ends.

Layer: capabilities. Imports the core, `fathom.backends` and `fathom.hosting`; never
`fathom.server` (a server fills in `fathom.hosting`).
"""

from typing import TYPE_CHECKING

from fathom._lazy import lazy_exports

if TYPE_CHECKING:
    from fathom.middleware.async_subagents.middleware import AsyncSubAgentMiddleware
    from fathom.middleware.async_subagents.tasks import (
        AsyncSubAgent,
        AsyncSubAgentState,
        AsyncTask,
        TaskEvent,
    )

_WHERE = {
    "fathom.middleware.async_subagents.middleware": ("AsyncSubAgentMiddleware",),
    "fathom.middleware.async_subagents.tasks": (
        "AsyncSubAgent", "AsyncSubAgentState", "AsyncTask", "TaskEvent",
    ),
}

__all__ = [
    "AsyncSubAgent",
    "AsyncSubAgentMiddleware",
    "AsyncSubAgentState",
    "AsyncTask",
    "TaskEvent",
]

# Each name is imported on first use: a child agent's notifier (`parent_notifier`) loads
# without the parent's tools and transport.
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
