"""Custom stream events for the subagents that code in `eval` starts.

Each is one LangGraph custom stream chunk (`stream_mode="custom"`), written from the
`eval` tool's own task so that it arrives whether or not the caller streams subgraphs:

    {"type": "subagent", "event": "start" | "complete" | "error",
     "subagent_type": ..., "label": ..., "call_id": ..., "tool_call_id": ...}

`label` is the code's own name for the call (`task(..., label="judge 1")`), `None` when it
gave none; `tool_call_id` is the `eval` call's id, `call_id` the `task()` call's id within
it; an `error` event also has `error`, the message the code receives.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Literal

__all__ = ["SUBAGENT_EVENT", "subagent_event"]

logger = logging.getLogger(__name__)

SUBAGENT_EVENT = "subagent"
"""The `type` of the custom stream events about the code's subagents."""


def subagent_event(
    writer: Callable[[Any], None] | None,
    event: Literal["start", "complete", "error"],
    *,
    subagent_type: str,
    label: str | None,
    call_id: str,
    tool_call_id: str,
    error: str | None = None,
) -> None:
    """Write one subagent event through `writer` (a LangGraph stream writer), if any."""
    if writer is None:
        return
    payload: dict[str, Any] = {
        "type": SUBAGENT_EVENT, "event": event, "subagent_type": subagent_type,
        "label": label, "call_id": call_id, "tool_call_id": tool_call_id,
    }
    if error is not None:
        payload["error"] = error
    try:
        writer(payload)
    except RuntimeError:  # the run's event loop closed meanwhile: nobody reads the event
        logger.warning("could not write the %s event of %s", event, call_id, exc_info=True)
