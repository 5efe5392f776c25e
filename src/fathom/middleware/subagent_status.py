"""A subagent that failed ends as `failed` in LangGraph's streaming protocol, not `completed`.

LangGraph's v3 streaming (`graph.stream_events(..., version="v3")`: `run.subagents`,
`run.subgraphs`, `run.lifecycle`, and the SDK clients that read the same events) decides how a
nested run ended from the result of the parent task that ran it: an `error` there means
`failed`, none means `completed`. fathom's `task` tool catches a subagent's exception and
answers with an error `ToolMessage`, so the parent goes on; the tool node's task then ends
without an error and the subagent would read as `completed`.

`SubagentFailureTransformer` (registered by `SubAgentMiddleware`) puts the subagent's error
text on that task result before LangGraph's own lifecycle bookkeeping reads it. Only results
whose `ToolMessage` is marked as a subagent failure (`subagent_failure_artifact`) change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from langchain_core.messages import ToolMessage
from langgraph.stream._types import ProtocolEvent, StreamTransformer

__all__ = [
    "FAILURE_ARTIFACT_KEY",
    "SubagentFailureTransformer",
    "failure_text",
    "subagent_failure_artifact",
]

FAILURE_ARTIFACT_KEY = "fathom_subagent_failed"
"""Key of the `ToolMessage.artifact` dict that marks a `task` answer as a subagent failure.
The artifact is never sent to the model."""


def subagent_failure_artifact(name: str, error: str) -> dict[str, Any]:
    """The artifact of the `ToolMessage` that reports subagent `name` failing with `error`."""
    return {FAILURE_ARTIFACT_KEY: True, "subagent": name, "error": error}


def failure_text(message: Any) -> str | None:
    """The error text when `message` reports a failed subagent, else `None`."""
    if not isinstance(message, ToolMessage) or message.status != "error":
        return None
    artifact = message.artifact
    if not isinstance(artifact, Mapping) or not artifact.get(FAILURE_ARTIFACT_KEY):
        return None
    return str(artifact.get("error") or message.text)


def _messages(result: Any) -> list[Any]:
    """The messages a task result writes: `{"messages": value}`, where the value is a
    message, a list of them, or `{"$writes": [...]}` when the task wrote the channel twice."""
    written = result.get("messages") if isinstance(result, Mapping) else None
    if isinstance(written, Mapping):
        writes = written.get("$writes")
        written = writes if isinstance(writes, list) else []
        return [m for w in written for m in (w if isinstance(w, list | tuple) else [w])]
    if written is None:
        return []
    return list(written) if isinstance(written, list | tuple) else [written]


class SubagentFailureTransformer(StreamTransformer):
    """Marks the tool task that ran a failed subagent as failed, with the subagent's error.

    It runs before LangGraph's built-in transformers (`before_builtins`), so their lifecycle
    of the subagent's namespace ends `failed` with that text; the parent run itself goes on
    (the model reads the error `ToolMessage` and decides what to do).
    """

    before_builtins: ClassVar[bool] = True
    supports_sync: ClassVar[bool] = True
    required_stream_modes: ClassVar[tuple[str, ...]] = ("tasks",)

    def init(self) -> dict[str, Any]:
        """No projection of its own."""
        return {}

    def process(self, event: ProtocolEvent) -> bool:
        """Put the subagent's error on a task result that reports a failed subagent."""
        if event.get("method") != "tasks":
            return True
        params = event.get("params")
        data = params.get("data") if isinstance(params, Mapping) else None
        if not isinstance(data, Mapping) or "result" not in data or data.get("error"):
            return True
        errors = [t for t in map(failure_text, _messages(data.get("result"))) if t]
        if errors and isinstance(params, dict):
            params["data"] = {**data, "error": "\n".join(errors)}
        return True
