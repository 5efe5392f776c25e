"""The `execute` tool: run a shell command in a backend that can (`SandboxBackendProtocol`).

The tool answers with the command's combined output, then its exit code; a non-zero exit
(124: killed at its timeout) is an error result. Output longer than the inline limit is
not cut: the whole capture is saved under `/large_tool_results/` on the agent's backend
(where the summarization offload puts big tool results too) and the answer shows its head
and tail and the path, which `read_file` pages with offset and limit. While the command runs, each
piece of output is sent as a custom stream event, so `stream_mode="custom"` shows progress:
`{"type": "execute_output", "tool_call_id": ..., "chunk": ...}`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from langchain.agents.middleware.types import AgentMiddleware
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool
from langgraph.types import Command
from pydantic import BaseModel, Field

from fathom.backends.protocol import (
    BackendProtocol,
    ExecuteResponse,
    adopt,
    resolve_backend,
    supports_execute,
)
from fathom.backends.utils import positive_seconds
from fathom.middleware.context.summarization import OFFLOAD_DIR, artifacts_dir
from fathom.middleware.filesystem.answers import error_message
from fathom.prompt import PromptSection, SectionPromptMixin
from fathom.tool_answers import Failure, aattempt, attempt, tool_of

__all__ = [
    "EXECUTE_DESCRIPTION",
    "EXECUTE_OUTPUT_CHARS",
    "EXECUTE_PROMPT",
    "EXECUTE_STREAM_EVENT",
    "EXECUTE_TOOL",
    "ExecuteMiddleware",
    "execute_answer",
]

EXECUTE_TOOL = "execute"
"""The name of the tool that runs a shell command on the backend."""

EXECUTE_STREAM_EVENT = "execute_output"
"""The `type` of the custom stream events that carry a running command's output."""

EXECUTE_OUTPUT_CHARS = 30_000
"""Output up to this many characters is shown inline; longer output is saved to a file and
the answer shows its head and tail (the default of `ExecuteMiddleware(max_inline_chars=)`)."""

EXECUTE_PROMPT = """## Shell

You can run shell commands with `execute`. Each call starts a fresh `sh` in the workspace directory, so `cd` and variables do not carry over: chain steps with `&&`. Prefer short, non-interactive commands (no editors or prompts), and pass `timeout` (seconds) for slow builds or tests; a command still running at its timeout is killed. The answer is the combined stdout and stderr followed by the exit code (124: killed at its timeout); very long output is saved to a file whose head and tail you see, and you page the rest with `read_file` (offset and limit) or search it with `grep`. Check the exit code before you rely on a command's result."""  # noqa: E501

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


def execute_answer(
    response: ExecuteResponse,
    runtime: ToolRuntime,
    *,
    max_inline_chars: int = EXECUTE_OUTPUT_CHARS,
    saved_at: str | None = None,
    save_error: str | None = None,
) -> ToolMessage:
    """The tool answer: the output (head and tail when longer than `max_inline_chars`,
    with where the whole output was saved, or why it could not be), then the exit code."""
    output = response.output
    if response.exit_code is not None:
        # `LocalShellBackend` ends a failed command's output with the reference's
        # `Exit code: N`; the answer's own exit-code line says it once.
        output = output.removesuffix(f"\n\nExit code: {response.exit_code}")
        if output == f"Exit code: {response.exit_code}":
            output = ""
    parts: list[str] = []
    if len(output) > max_inline_chars:
        parts.append(_head_and_tail(output, max_inline_chars, saved_at, save_error))
    else:
        parts.append(output.rstrip("\n") if output.strip() else "(no output)")
    if response.truncated:
        parts.append(
            "[the output was cut at the backend's output capture cap; send long output "
            "to a file (`cmd > out.txt 2>&1`) and page it with read_file, or narrow it with "
            "head, tail or grep]"
        )
    if response.exit_code is None:
        parts.append("[no exit code: the command did not finish]")
    else:
        parts.append(f"[exit code {response.exit_code}]")
    return ToolMessage(
        content="\n".join(parts),
        tool_call_id=runtime.tool_call_id,
        name=EXECUTE_TOOL,
        status="success" if response.exit_code == 0 else "error",
    )


def _head_and_tail(output: str, limit: int, saved_at: str | None, save_error: str | None) -> str:
    head = output[: limit // 2]
    tail = output[len(output) - limit // 2 :]
    lines = output.count("\n") + (not output.endswith("\n"))
    omitted = len(output) - len(head) - len(tail)
    if saved_at is not None:
        where = (
            f"the whole output ({len(output):,} characters, {lines:,} lines) is saved at "
            f"`{saved_at}`: page it with read_file (offset and limit, in lines) or search it "
            "with grep"
        )
    else:
        where = f"the whole output could not be saved ({save_error or 'no backend'})"
    return f"{head}\n[... {omitted:,} characters omitted; {where} ...]\n{tail.rstrip(chr(10))}"


_UNSAFE_ID = re.compile(r"[^A-Za-z0-9_.-]")


def _offload_path(runtime: ToolRuntime, backend: Any) -> str:
    call_id = _UNSAFE_ID.sub("_", str(runtime.tool_call_id or "call"))[:100]
    return f"{artifacts_dir(backend, OFFLOAD_DIR.strip('/'))}/execute_{call_id}.txt"


def _answer(
    response: ExecuteResponse, runtime: ToolRuntime, limit: int, written: Any, path: str, note: str
) -> Any:
    """The answer message (a `Command` when the saved file is a state update)."""
    error = getattr(written, "error", None) if written is not None else None
    saved = written is not None and not error
    message = execute_answer(
        response,
        runtime,
        max_inline_chars=limit,
        saved_at=path if saved else None,
        save_error=str(error) if error else None,
    )
    message = _with_note(message, note)
    files_update = getattr(written, "files_update", None) if saved else None
    if files_update:
        return Command(update={"files": files_update, "messages": [message]})
    return message


def _cannot_execute(runtime: ToolRuntime) -> ToolMessage:
    return error_message(
        "Error: this backend cannot run commands; execute is not available here. Use the "
        "file tools instead.",
        runtime,
        EXECUTE_TOOL,
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


def _capped(
    timeout: int | None, middleware: ExecuteMiddleware, backend: Any
) -> tuple[float | None, str]:
    """The model's `timeout` lowered to the operator's cap, and a note when it was.

    The cap is the smallest of the middleware's `max_timeout` and the backend's own
    `max_timeout` attribute (the built-in backends have one); the model cannot raise it.
    """
    found = (middleware.max_timeout, getattr(backend, "max_timeout", None))
    caps = [cap for cap in map(positive_seconds, found) if cap is not None]
    if timeout is None or not caps or timeout <= min(caps):
        return timeout, ""
    cap = min(caps)
    return cap, f"[timeout {timeout:g}s is above the limit of {cap:g}s; it ran with {cap:g}s]"


def _with_note(message: ToolMessage, note: str) -> ToolMessage:
    if note:
        message.content = f"{note}\n{message.content}"
    return message


def _build_tool(middleware: ExecuteMiddleware) -> BaseTool:
    limit = middleware.max_inline_chars

    def execute(runtime: ToolRuntime, command: str, timeout: int | None = None) -> Any:
        backend: Any = resolve_backend(middleware.backend, runtime)
        if not supports_execute(backend):
            return _cannot_execute(runtime)
        seconds, note = _capped(timeout, middleware, backend)
        response = backend.execute(command, timeout=seconds, on_output=_writer(runtime))
        written, path = None, _offload_path(runtime, backend)
        if len(response.output) > limit:
            written = _saved(attempt(lambda: backend.write(path, response.output), _SAVING))
        return _answer(response, runtime, limit, written, path, note)

    async def aexecute(runtime: ToolRuntime, command: str, timeout: int | None = None) -> Any:
        backend: Any = resolve_backend(middleware.backend, runtime)
        if not supports_execute(backend):
            return _cannot_execute(runtime)
        seconds, note = _capped(timeout, middleware, backend)
        response = await backend.aexecute(command, timeout=seconds, on_output=_writer(runtime))
        written, path = None, _offload_path(runtime, backend)
        if len(response.output) > limit:
            written = _saved(await aattempt(backend.awrite(path, response.output), _SAVING))
        return _answer(response, runtime, limit, written, path, note)

    return tool_of(EXECUTE_TOOL, middleware.tool_description, ExecuteInput, execute, aexecute)


_SAVING = "saving a command's output"


class _SaveFailed:
    """Stands in for a write result when the backend raised instead of answering: a broken
    backend must not lose the command's answer."""

    def __init__(self, failure: Failure) -> None:
        self.error = failure.text
        self.files_update = None


def _saved(outcome: Any) -> Any:
    return _SaveFailed(outcome) if isinstance(outcome, Failure) else outcome


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
            `max_timeout` caps it too (`BubblewrapSandbox`'s default is its `timeout`;
            `LocalShellBackend` has none unless given, as in the reference); `None` leaves
            only the backend's.
        max_inline_chars: Output up to this many characters is shown whole; longer output
            is written to `/large_tool_results/execute_<tool call id>.txt` on the backend
            (with `write`) and the answer shows its first and last `max_inline_chars / 2`
            characters and the path. How much of a command's output is kept at all is the
            backend's capture cap (`max_output_bytes` on the built-in shells).
    """

    def __init__(
        self,
        *,
        backend: Backend,
        system_prompt: str | None = None,
        tool_description: str | None = None,
        max_timeout: float | None = None,
        max_inline_chars: int = EXECUTE_OUTPUT_CHARS,
    ) -> None:
        super().__init__()
        if isinstance(max_inline_chars, bool) or not (
            isinstance(max_inline_chars, int) and max_inline_chars >= 100
        ):
            raise ValueError(
                f"max_inline_chars must be an int of at least 100, not {max_inline_chars!r}."
            )
        self.max_inline_chars: int = max_inline_chars
        if max_timeout is not None and positive_seconds(max_timeout) is None:
            raise ValueError(
                f"max_timeout must be a positive number of seconds or None, not {max_timeout!r}."
            )
        self.max_timeout: float | None = max_timeout
        self.backend: Backend = adopt(backend)
        self.tool_description = tool_description or EXECUTE_DESCRIPTION
        self.section = PromptSection(
            EXECUTE_TOOL,
            EXECUTE_PROMPT if system_prompt is None else system_prompt,
            "conditional",
            tools=frozenset({EXECUTE_TOOL}),  # left out where `execute` is not offered
        )
        self.tools = [_build_tool(self)]
