"""Run stream events as the thread-centric streaming protocol's events (langgraph-sdk's
``client.threads.stream``; langchain-protocol's ``Event``).

Each server event of a run becomes at most one protocol event ``{"type": "event",
"event_id", "seq", "method", "params": {"namespace", "timestamp", "data"}}``:

* ``metadata`` (a run starts) → ``lifecycle`` ``{"event": "running"}``;
* ``values``, ``updates`` (``{"node", "values"}`` for one node's update) and ``custom``
  (``{"payload"}``) keep their names; ``|``-separated subgraph names become ``namespace``;
* ``error`` → ``lifecycle`` ``{"event": "failed", "error"}``;
* a run's end → one ``input.requested`` ``{"interrupt_id", "payload"}`` per pending
  interrupt and ``lifecycle`` ``interrupted``, or ``lifecycle`` ``completed``/``failed``.

* ``messages`` (content-block events: ``message-start``, ``content-block-start``/``-delta``/
  ``-finish``, ``message-finish``) and ``tools`` (``tool-started``, ``tool-output-delta``,
  ``tool-finished``, ``tool-error``) keep their names and data: only runs started with
  ``run.start``/``input.respond`` publish them (``execution.runner``).

A subgraph's first event is preceded by a ``lifecycle`` ``{"event": "started",
"graph_name"}`` event in its namespace (one per namespace and run, ``subgraph_starts``): the
SDK discovers ``thread.subgraphs`` from those.

``event_id`` is ``{run_id}:{index}`` (``{run_id}:started:{namespace}`` for a subgraph's
start), stable across connections, which the SDK dedups on; ``seq`` numbers a connection's
events.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from typing import Any

import orjson

__all__ = [
    "CHANNELS",
    "matches",
    "protocol_event",
    "run_end_events",
    "subgraph_starts",
]

CHANNELS = (
    "values",
    "updates",
    "messages",
    "tools",
    "lifecycle",
    "input",
    "custom",
    "tasks",
    "checkpoints",
)
"""The channels a subscription may name (and ``custom:<name>``)."""


def _channel(method: str, data: Any) -> str:
    if method == "input.requested":
        return "input"
    if method == "custom" and isinstance(data, dict) and data.get("name"):
        return f"custom:{data['name']}"
    return method


def matches(
    event: dict[str, Any],
    channels: Collection[str],
    namespaces: Sequence[Sequence[str]] | None,
    depth: int | None,
) -> bool:
    """Whether a subscription to ``channels`` under ``namespaces`` (prefixes; None: all)
    within ``depth`` levels of them gets ``event``."""
    params = event["params"]
    channel = _channel(event["method"], params.get("data"))
    if channel not in channels and not (channel.startswith("custom:") and "custom" in channels):
        return False
    if not namespaces:
        return True
    namespace: list[str] = params["namespace"]
    for prefix in namespaces:
        if len(prefix) > len(namespace):
            continue
        if all(
            segment == part or (":" not in segment and part.split(":", 1)[0] == segment)
            for segment, part in zip(prefix, namespace, strict=False)
        ) and (depth is None or len(namespace) - len(prefix) <= depth):
            return True
    return False


def _event(event_id: str, method: str, namespace: list[str], data: Any) -> dict[str, Any]:
    return {
        "type": "event",
        "event_id": event_id,
        "method": method,
        "params": {"namespace": namespace, "timestamp": int(time.time() * 1000), "data": data},
    }


def protocol_event(run_id: str, index: int, event: str, data: bytes) -> dict[str, Any] | None:
    """The protocol event for one server event of a run (None: it has none); no ``seq``."""
    method, *namespace = event.split("|")
    event_id = f"{run_id}:{index}"
    if method == "metadata":
        return _event(event_id, "lifecycle", [], {"event": "running"})
    payload = orjson.loads(data)
    if method == "error":
        message = payload.get("message") if isinstance(payload, dict) else str(payload)
        return _event(event_id, "lifecycle", [], {"event": "failed", "error": message})
    if method == "values":
        return _event(event_id, "values", namespace, payload)
    if method == "updates":
        if isinstance(payload, dict) and len(payload) == 1:
            ((node, values),) = payload.items()
            update = {"node": node, "values": values if isinstance(values, dict) else {}}
        else:
            update = {"values": payload}
        return _event(event_id, "updates", namespace, update)
    if method == "custom":
        return _event(event_id, "custom", namespace, {"payload": payload})
    if method in ("messages", "tools") and isinstance(payload, dict) and "event" in payload:
        return _event(event_id, method, namespace, payload)
    return None


def subgraph_starts(
    run_id: str, event: dict[str, Any], started: set[tuple[str, ...]]
) -> list[dict[str, Any]]:
    """The ``lifecycle`` ``started`` events of the subgraphs ``event``'s namespace is in that
    are not in ``started`` yet (outermost first); they are added to it."""
    namespace: list[str] = event["params"]["namespace"]
    events: list[dict[str, Any]] = []
    for depth in range(1, len(namespace) + 1):
        path = tuple(namespace[:depth])
        if path in started:
            continue
        started.add(path)
        data = {"event": "started", "graph_name": path[-1].split(":", 1)[0]}
        events.append(_event(f"{run_id}:started:{'|'.join(path)}", "lifecycle", list(path), data))
    return events


def run_end_events(
    run_id: str, status: str, interrupts: Sequence[dict[str, Any]], failed: bool
) -> list[dict[str, Any]]:
    """The events after a run's last one: its pending interrupts and final lifecycle
    (nothing when its ``error`` event already said it failed)."""
    if failed:
        return []
    if interrupts:
        requests = [
            _event(
                f"{run_id}:input:{item['id']}",
                "input.requested",
                [],
                # "value" too: langgraph-sdk 0.4.14 reads the payload from it
                {
                    "interrupt_id": item["id"],
                    "payload": item.get("value"),
                    "value": item.get("value"),
                },
            )
            for item in interrupts
        ]
        return [*requests, _event(f"{run_id}:end", "lifecycle", [], {"event": "interrupted"})]
    phase = {"success": "completed", "error": "failed"}.get(status, "failed")
    return [_event(f"{run_id}:end", "lifecycle", [], {"event": phase})]
