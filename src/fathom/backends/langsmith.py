"""`LangSmithSandbox`: a `BaseSandbox` over a LangSmith sandbox (the `langsmith` SDK's).

It wraps a `langsmith.sandbox.Sandbox` that the caller made (with its own client and
account): commands run through the SDK's `run`, and files travel through its `read` and
`write`, so no file content goes through a shell command. The other file operations
(`ls`, `edit`, `grep`, `glob`, `delete`) are `BaseSandbox`'s over the Deep Agents wire
(the class defines its own `upload_files` and `download_files`), as in the reference.

`langsmith` is imported only when a call needs its exception types; constructing the
backend needs just the SDK object.
"""

from __future__ import annotations

import base64
import logging
from pathlib import PurePosixPath
from typing import Any

from fathom.backends import _reference_wire as wire
from fathom.backends import protocol
from fathom.backends.errors import BackendError, ErrorKind
from fathom.backends.sandbox import BaseSandbox
from fathom.state import FileData

__all__ = ["LangSmithSandbox"]

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 30 * 60
"""Seconds a command may run when `execute` is given no `timeout`."""


def _response(result: Any) -> protocol.ExecuteResponse:
    """An `ExecuteResponse` from the SDK's execution result: stdout, then stderr."""
    output = result.stdout or ""
    if result.stderr:
        output = f"{output}\n{result.stderr}" if output else result.stderr
    return protocol.ExecuteResponse(output=output, exit_code=result.exit_code, truncated=False)


def _read_error(kind: ErrorKind, path: str, detail: str) -> protocol.ReadResult:
    return protocol.ReadResult(
        error=BackendError(kind, path, detail, message=f"File '{path}': {detail}")
    )


def _as_base64(path: str, raw: bytes) -> protocol.ReadResult:
    if len(raw) > wire.MAX_BINARY_BYTES:
        detail = f"Binary file exceeds maximum preview size of {wire.MAX_BINARY_BYTES} bytes"
        return _read_error(ErrorKind.TOO_LARGE, path, detail)
    return protocol.ReadResult(
        file_data=FileData(content=base64.b64encode(raw).decode("ascii"), encoding="base64")
    )


def page_text(path: str, text: str, offset: int, limit: int) -> protocol.ReadResult:
    """One `read` page of `text` as the Deep Agents wire pages it: universal newlines,
    lines joined with `\\n`, at most `MAX_OUTPUT_BYTES` (then `TRUNCATION_MSG`)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    first, count = wire.read_bounds(offset, limit)
    if count <= 0:
        return protocol.ReadResult(
            file_data=FileData(content="", encoding="utf-8"), no_lines_requested=True
        )
    total = len(lines)
    if first >= total:
        detail = f"Line offset {first} exceeds file length ({total} lines)"
        return _read_error(ErrorKind.PAST_END, path, detail)
    shown = lines[first : first + count]
    content, rendered = "\n".join(shown), len(shown)
    budget = wire.MAX_OUTPUT_BYTES - len(wire.TRUNCATION_MSG.encode("utf-8"))
    encoded = content.encode("utf-8")
    if len(encoded) > budget:
        kept = encoded[:budget].decode("utf-8", errors="ignore")
        rendered = kept.count("\n") or 1  # whole lines shown; at least one, to move on
        content = kept + wire.TRUNCATION_MSG
    end = first + rendered
    return protocol.ReadResult(
        file_data=FileData(content=content, encoding="utf-8"),
        total_lines=total, start_line=first + 1, end_line=end,
        next_offset=end if end < total else None,
    )


class LangSmithSandbox(BaseSandbox):
    """A LangSmith sandbox as a backend (the Deep Agents API's `LangSmithSandbox`).

    Args:
        sandbox: The `langsmith.sandbox.Sandbox` to wrap; its `name` is this backend's `id`.

    `execute(command, timeout=None)` runs the command with the SDK (30 minutes when no
    `timeout` is given; the SDK reads `0` as no timeout) and joins stdout and stderr.
    `aexecute` uses the SDK's async client, made once on first use (`aclose` closes it).
    `read` fetches the file's bytes and pages them here; `write` creates the parent
    directories with one command, then writes the bytes through the SDK.
    """

    enable_capture_offload = True  # the reference's flag; fathom's execute tool offloads itself

    def __init__(self, sandbox: Any) -> None:
        self._sandbox = sandbox
        self._default_timeout: int = DEFAULT_TIMEOUT
        self._async_sandbox: Any = None
        self._async_client: Any = None

    @property
    def id(self) -> str:
        """The LangSmith sandbox's name."""
        return self._sandbox.name

    def execute(self, command: str, *, timeout: int | None = None) -> protocol.ExecuteResponse:
        """Run `command` in the sandbox (the default timeout when `timeout` is `None`)."""
        seconds = self._default_timeout if timeout is None else timeout
        return _response(self._sandbox.run(command, timeout=seconds))

    def _aget_sandbox(self) -> Any:
        """The SDK's async sandbox, made on first use with its own client (reused, since
        each new client opens its own connections)."""
        if self._async_sandbox is None:
            self._async_client = self._sandbox._client.to_async()
            self._async_sandbox = self._sandbox.to_async(client=self._async_client)
        return self._async_sandbox

    async def aexecute(
        self, command: str, *, timeout: int | None = None
    ) -> protocol.ExecuteResponse:
        """Async `execute`, over the SDK's async client."""
        seconds = self._default_timeout if timeout is None else timeout
        return _response(await self._aget_sandbox().run(command, timeout=seconds))

    async def aclose(self) -> None:
        """Close the async client, if one was made (a later `aexecute` makes another)."""
        client = self._async_client
        self._async_sandbox = self._async_client = None
        if client is not None:
            await client.aclose()

    def write(self, file_path: str, content: str) -> protocol.WriteResult:
        """Create the parent directories, then write `content` (UTF-8) with the SDK."""
        from langsmith.sandbox import SandboxClientError

        failed = wire.check_preflight(
            self.execute(wire.write_preflight_command(file_path)), file_path
        )
        if failed is not None:
            return failed
        try:
            self._sandbox.write(file_path, content.encode("utf-8"))
        except SandboxClientError as error:
            text = f"Failed to write file '{file_path}': {error}"
            return protocol.WriteResult(
                error=BackendError(ErrorKind.FAILED, file_path, str(error), message=text)
            )
        return protocol.WriteResult(path=file_path)

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> protocol.ReadResult:
        """Fetch the file with the SDK and page it here (see `page_text`); binary files
        (by extension, or not UTF-8) come back whole as base64, up to `MAX_BINARY_BYTES`."""
        from langsmith.sandbox import ResourceNotFoundError, SandboxClientError

        try:
            raw = self._sandbox.read(file_path)
        except ResourceNotFoundError:
            return _read_error(ErrorKind.NOT_FOUND, file_path, "file_not_found")
        except SandboxClientError as error:
            logger.warning("LangSmith read of %s failed: %s", file_path, error)
            return _read_error(ErrorKind.FAILED, file_path, f"{type(error).__name__}: {error}")
        if not raw:
            return protocol.ReadResult(
                file_data=FileData(content=wire.EMPTY_FILE_REMINDER, encoding="utf-8")
            )
        if PurePosixPath(file_path).suffix.lower() in wire.BINARY_SUFFIXES:
            return _as_base64(file_path, raw)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            return _as_base64(file_path, raw)
        return page_text(file_path, text, offset, limit)

    def download_files(self, paths: list[str]) -> list[protocol.FileDownloadResponse]:
        """Each file's bytes through the SDK; errors per file (`invalid_path` for a
        relative path, `file_not_found`, `is_directory`)."""
        from langsmith.sandbox import ResourceNotFoundError, SandboxClientError

        responses: list[protocol.FileDownloadResponse] = []
        for path in paths:
            if not path.startswith("/"):
                responses.append(protocol.FileDownloadResponse(path, error=ErrorKind.INVALID))
                continue
            try:
                responses.append(protocol.FileDownloadResponse(path, self._sandbox.read(path)))
            except ResourceNotFoundError:
                responses.append(protocol.FileDownloadResponse(path, error=ErrorKind.NOT_FOUND))
            except SandboxClientError as error:
                kind = (
                    ErrorKind.IS_DIRECTORY if "is a directory" in str(error).lower()
                    else ErrorKind.NOT_FOUND
                )
                responses.append(protocol.FileDownloadResponse(path, error=kind))
        return responses

    def upload_files(self, files: list[tuple[str, bytes]]) -> list[protocol.FileUploadResponse]:
        """Write each file through the SDK; errors per file (`invalid_path` for a relative
        path, `permission_denied` when the SDK refuses)."""
        from langsmith.sandbox import SandboxClientError

        responses: list[protocol.FileUploadResponse] = []
        for path, content in files:
            if not path.startswith("/"):
                responses.append(protocol.FileUploadResponse(path, error=ErrorKind.INVALID))
                continue
            try:
                self._sandbox.write(path, content)
            except SandboxClientError as error:
                logger.debug("LangSmith upload of %s failed: %s", path, error)
                responses.append(protocol.FileUploadResponse(path, error=ErrorKind.PERMISSION))
            else:
                responses.append(protocol.FileUploadResponse(path))
        return responses
