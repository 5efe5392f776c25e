"""The `execute` tool: run a shell command in a backend that can (`SandboxBackendProtocol`).

The tool answers with the command's combined output, then its exit code; a non-zero exit
(or a command killed at its timeout) is an error result. While the command runs, each
piece of output is sent as a custom stream event, so `stream_mode="custom"` shows progress:
`{"type": "execute_output", "tool_call_id": ..., "chunk": ...}`.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

from langchain.agents.middleware.types import AgentMiddleware
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from fathom.backends.protocol import (
    BackendProtocol,
    ExecuteResponse,
    resolve_backend,
    supports_execute,
)
from fathom.middleware.fs_answers import error_message
from fathom.prompt import PromptSection, SectionPromptMixin

__all__ = [
    "EXECUTE_DESCRIPTION",
    "EXECUTE_OUTPUT_CHARS",
    "EXECUTE_PROMPT",
    "EXECUTE_STREAM_EVENT",
    "ExecuteMiddleware",
    "execute_answer",
]

EXECUTE_STREAM_EVENT = "execute_output"
"""The `type` of the custom stream events that carry a running command's output."""

EXECUTE_OUTPUT_CHARS = 100_000
"""The tool answer keeps at most this many characters of output (whatever the backend)."""

EXECUTE_PROMPT = """## Shell

You can run shell commands with `execute`. Each call starts a fresh `sh` in the workspace directory, so `cd` and variables do not carry over: chain steps with `&&`. Prefer short, non-interactive commands (no editors or prompts), and pass `timeout` (seconds) for slow builds or tests; a command still running at its timeout is killed. The answer is the combined stdout and stderr, cut when very long (send long output to a file and read it with `read_file`), followed by the exit code. Check the exit code before you rely on a command's result."""  # noqa: E501

EXECUTE_DESCRIPTION = (
    "Run a shell command in the workspace and return its combined stdout/stderr and exit "
    "code. Each call is a fresh shell. timeout: seconds before the command is killed "
    "(optional)."
)

Backend = BackendProtocol | Callable[[Any], BackendProtocol]


class ExecuteInput(BaseModel):
    command: str = Field(description="The shell command line to run.")
    timeout: int | None = Field(
        default=None, ge=1, description="Seconds before the command is killed (optional)."
    )


def execute_answer(response: ExecuteResponse, runtime: ToolRuntime) -> ToolMessage:
    """The tool answer: bounded output, a truncation note, then the exit code."""
    output = response.output
    cut = len(output) > EXECUTE_OUTPUT_CHARS
    if cut:
        output = output[:EXECUTE_OUTPUT_CHARS]
    parts = [output.rstrip("\n") if output.strip() else "(no output)"]
    if cut or response.truncated:
        parts.append(
            "[output truncated: send long output to a file (`cmd > out.txt 2>&1`) and read "
            "it with read_file, or narrow it with head, tail or grep]"
        )
    if response.exit_code is None:
        parts.append("[no exit code: the command was killed at its timeout]")
    else:
        parts.append(f"[exit code {response.exit_code}]")
    return ToolMessage(
        content="\n".join(parts),
        tool_call_id=runtime.tool_call_id,
        name="execute",
        status="success" if response.exit_code == 0 else "error",
    )


def _cannot_execute(runtime: ToolRuntime) -> ToolMessage:
    return error_message(
        "Error: this backend cannot run commands; execute is not available here. Use the "
        "file tools instead.",
        runtime,
        "execute",
    )


def _writer(runtime: ToolRuntime) -> Callable[[str], None] | None:
    """A callback sending output chunks as custom stream events, or `None` when none."""
    write = getattr(runtime, "stream_writer", None)
    if write is None:
        try:
            from langgraph.config import get_stream_writer

            write = get_stream_writer()
        except (RuntimeError, KeyError):
            return None
    tool_call_id = runtime.tool_call_id

    def send(chunk: str) -> None:
        write({"type": EXECUTE_STREAM_EVENT, "tool_call_id": tool_call_id, "chunk": chunk})

    return send


def _streams(method: Any) -> bool:
    """Whether a backend's `execute`/`aexecute` accepts `on_output`."""
    try:
        parameters = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False
    return "on_output" in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )


def _cap(value: object) -> float | None:
    """`value` as a timeout cap when it is a positive finite number, else `None`."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if 0 < value < float("inf") else None


def _capped(
    timeout: int | None, middleware: ExecuteMiddleware, backend: Any
) -> tuple[float | None, str]:
    """The model's `timeout` lowered to the operator's cap, and a note when it was.

    The cap is the smallest of the middleware's `max_timeout` and the backend's own
    `max_timeout` attribute (the built-in backends have one); the model cannot raise it.
    """
    found = (_cap(middleware.max_timeout), _cap(getattr(backend, "max_timeout", None)))
    caps = [cap for cap in found if cap is not None]
    if timeout is None or not caps or timeout <= min(caps):
        return timeout, ""
    cap = min(caps)
    return cap, f"[timeout {timeout:g}s is above the limit of {cap:g}s; it ran with {cap:g}s]"


def _with_note(message: ToolMessage, note: str) -> ToolMessage:
    if note:
        message.content = f"{note}\n{message.content}"
    return message


def _call_kwargs(method: Any, timeout: float | None, runtime: ToolRuntime) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"timeout": timeout}
    if _streams(method) and (send := _writer(runtime)) is not None:
        kwargs["on_output"] = send
    return kwargs


def _build_tool(middleware: ExecuteMiddleware) -> BaseTool:
    def execute(runtime: ToolRuntime, command: str, timeout: int | None = None) -> Any:
        backend = resolve_backend(middleware.backend, runtime)
        if not supports_execute(backend):
            return _cannot_execute(runtime)
        run = backend.execute  # type: ignore[attr-defined]
        seconds, note = _capped(timeout, middleware, backend)
        answer = execute_answer(run(command, **_call_kwargs(run, seconds, runtime)), runtime)
        return _with_note(answer, note)

    async def aexecute(runtime: ToolRuntime, command: str, timeout: int | None = None) -> Any:
        backend = resolve_backend(middleware.backend, runtime)
        if not supports_execute(backend):
            return _cannot_execute(runtime)
        run = getattr(backend, "aexecute", None)
        seconds, note = _capped(timeout, middleware, backend)
        if run is None:
            sync = backend.execute  # type: ignore[attr-defined]
            response = await asyncio.to_thread(sync, command, seconds)
        else:
            response = await run(command, **_call_kwargs(run, seconds, runtime))
        return _with_note(execute_answer(response, runtime), note)

    return StructuredTool.from_function(
        name="execute",
        description=middleware.tool_description,
        func=execute,
        coroutine=aexecute,
        args_schema=ExecuteInput,
        infer_schema=False,
    )


class ExecuteMiddleware(SectionPromptMixin, AgentMiddleware):
    """Gives the agent the `execute` tool over a backend, and a "## Shell" prompt section.

    Add it only when the backend can run commands (`supports_execute`); a backend (or a
    factory's backend) that cannot makes the tool answer with an error.

    Args:
        backend: A backend with `execute` (e.g. `LocalShellBackend`), or a factory
            `(runtime) -> BackendProtocol` called for every tool call.
        system_prompt: Replaces the built-in prompt section; `""` adds none.
        tool_description: Replaces the tool's description.
        max_timeout: The most seconds the model may ask a command to run; a larger
            `timeout` is lowered to it and the answer says so. The backend's own
            `max_timeout` (the built-in backends' default is their `timeout`) caps it too;
            `None` leaves only the backend's.
    """

    def __init__(
        self,
        *,
        backend: Backend,
        system_prompt: str | None = None,
        tool_description: str | None = None,
        max_timeout: float | None = None,
    ) -> None:
        super().__init__()
        if max_timeout is not None and _cap(max_timeout) is None:
            raise ValueError(
                f"max_timeout must be a positive number of seconds or None, not {max_timeout!r}."
            )
        self.max_timeout: float | None = max_timeout
        self.backend: Backend = backend
        self.tool_description = tool_description or EXECUTE_DESCRIPTION
        self.section = PromptSection(
            "execute",
            EXECUTE_PROMPT if system_prompt is None else system_prompt,
            "conditional",
        )
        self.tools = [_build_tool(self)]
