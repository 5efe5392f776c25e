"""`BaseSandbox`: write `execute()` for a sandbox, get every file operation over it.

A sandbox integration (a hosted container, a VM, a remote shell) usually offers one
primitive: run a command and return its output. Subclass `BaseSandbox`, write `execute`
(and `id`), and `ls`, `read`, `write`, `edit`, `glob`, `grep`, `delete`, `upload_files` and
`download_files`, with their async twins over `aexecute`, are built on it: each is one plan
(`PlannedBackend`) that yields the requests it sends and receives the program's replies.

How the operations travel, so that no file name or content can reach the shell as text:

- each operation runs one fixed Python program in the sandbox: `python3 -c` with a short,
  constant loader that decodes the program from a base64 argument;
- the request (paths, patterns, file content) is JSON, base64-encoded, fed on stdin by a
  quoted heredoc whose random delimiter contains `_`, a character base64 never produces,
  so the payload can never end the heredoc early; nothing the model sends is ever placed
  in the command line, so quotes, `$()`, backticks, newlines or a leading `-` in a name
  are just bytes of a file name;
- file content travels base64 both ways, in chunks (`transfer_chunk_bytes`), so binary
  files stay intact and no command grows past what `sh -c` accepts;
- the program answers with one marked JSON line; other output (a login banner) is ignored.

Paths are virtual (`/notes/a.md`), normalised on the client (`..` above the root and NUL
bytes are refused with `INVALID`), then mapped under `root` in the sandbox (default `/`:
the sandbox's own absolute paths, as hosted sandboxes use them). With another `root`, the
program refuses any path whose real location (links resolved) leaves it (`OUTSIDE_ROOT`).

Matching is the other backends': `glob` and grep's `glob` filter use fathom's glob
dialect (the sandbox lists files; the client matches), grep is a literal search, and read
paging, edits and grep context lines are computed by the same helpers as on disk.

The sandbox needs `python3` (any 3.6+); without it every file operation fails with a
`FAILED` error that says so. `BaseSandbox` adds no isolation of its own: whoever can call
these methods can already run commands through `execute`.

**Providers written for the Deep Agents `BaseSandbox`.** Such a provider implements
`execute`, `id`, `upload_files` and `download_files` (the reference's abstract methods), and
its tests may answer `execute` with the reference's replies. A subclass that defines its own
`upload_files` or `download_files` (and keeps `root = "/"`) therefore speaks the reference's
wire (`fathom.backends._reference_wire`): the same calls in the same order (`write` is a
small `execute` that creates the parent directories, then the provider's `upload_files`),
the same replies parsed the same way, and the reference's result texts as each error's
`message` (with a fathom `ErrorKind`). Paths there are the sandbox's own, used as given.
Its payloads still never reach the shell as text: paths, patterns and contents travel
base64-encoded (see that module for the one exception, `delete`'s `shlex`-quoted path).
Set `wire_format = "fathom"` or `wire_format = "deepagents"` on a subclass to choose explicitly.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import secrets
import shlex
from abc import abstractmethod
from collections.abc import Generator
from typing import Any, ClassVar, Literal, TypeVar

from fathom.backends import _reference_wire as reference_wire
from fathom.backends import protocol
from fathom.backends._globbing import GlobBudget, GlobError, glob_matches
from fathom.backends._paths import PathError, normalize_dir, normalize_file_path, normalize_path
from fathom.backends.errors import BackendError, ErrorKind
from fathom.backends.utils import (
    MAX_EDIT_BYTES,
    create_file_data,
    edit_text,
    iso_timestamp,
    normalized,
    pattern_error,
    read_window,
)

__all__ = ["MAX_BINARY_BYTES", "MAX_OUTPUT_BYTES", "TRUNCATION_MSG", "BaseSandbox"]

MAX_BINARY_BYTES = reference_wire.MAX_BINARY_BYTES
"""The largest binary file (by extension) that `read` returns over the Deep Agents wire."""
MAX_OUTPUT_BYTES = reference_wire.MAX_OUTPUT_BYTES
"""The most bytes of text one `read` page returns over the Deep Agents wire."""
TRUNCATION_MSG = reference_wire.TRUNCATION_MSG
"""What a `read` page cut at `MAX_OUTPUT_BYTES` ends with (Deep Agents wire)."""
_READ_COMMAND_TEMPLATE = reference_wire.READ_COMMAND_TEMPLATE
_EDIT_INLINE_MAX_BYTES = reference_wire.EDIT_INLINE_MAX_BYTES


# The Deep Agents wire's command builders and reply parsers under the reference's private
# names, for providers that override one operation and reuse the rest (see
# `fathom.backends._reference_wire`).


def _build_read_cmd(file_path: str, offset: int, limit: int) -> str:
    return reference_wire.read_command(file_path, offset, limit, BaseSandbox.max_file_size_bytes)


def _parse_read_output(output: str, file_path: str) -> protocol.ReadResult:
    return reference_wire.parse_read(output, file_path)


def _build_write_preflight_cmd(file_path: str) -> str:
    return reference_wire.write_preflight_command(file_path)


def _check_preflight_result(
    result: protocol.ExecuteResponse, file_path: str
) -> protocol.WriteResult | None:
    return reference_wire.check_preflight(result, file_path)


def _map_edit_error(error: str, file_path: str, old_string: str) -> protocol.EditResult:
    return reference_wire.edit_error(error, file_path, old_string, None)


def _build_grep_cmd(
    pattern: str, path: str | None, glob: str | None, max_count: int | None = None, *,
    exclude_dirs: tuple[str, ...] = (),
) -> str:
    return reference_wire.grep_command(pattern, path, glob, max_count, exclude_dirs)


def _parse_grep_output(
    result: protocol.ExecuteResponse, path: str | None, max_count: int | None = None
) -> protocol.GrepResult:
    return reference_wire.parse_grep(result, path, max_count)


def _build_glob_cmd(pattern: str, search_path: str) -> str:
    return reference_wire.glob_command(pattern, search_path)


def _parse_glob_output(result: protocol.ExecuteResponse, search_path: str) -> protocol.GlobResult:
    return reference_wire.parse_glob(result, search_path)

_MARK = "@@fathom-sandbox-reply@@"

# The program run in the sandbox. It reads one JSON request from stdin and prints one
# reply line: the mark, then JSON (`{"error": [kind, detail]}` or the operation's data).
_PROGRAM = r'''
import base64, hashlib, json, os, re, shutil, stat, sys

MARK = "@@fathom-sandbox-reply@@"
req = json.loads(base64.b64decode(sys.stdin.read()).decode("utf-8"))
root = req["root"]
real_root = os.path.realpath(root)


class Fail(Exception):
    pass


TEMP = re.compile(r".*\.fathom-[0-9a-f]{12}")


def reply(data):
    sys.stdout.write("\n" + MARK + json.dumps(data) + "\n")
    sys.stdout.flush()


def place(rel):
    return os.path.join(root, rel) if rel else root


def inside(path):
    real = os.path.realpath(path)
    return real == real_root or real.startswith(real_root.rstrip("/") + "/")


def check(path):
    if not inside(path):
        raise Fail("outside_root")


def oserror(err):
    if isinstance(err, FileNotFoundError):
        return ["file_not_found", None]
    if isinstance(err, PermissionError):
        return ["permission_denied", err.strerror]
    if isinstance(err, IsADirectoryError):
        return ["is_directory", None]
    if isinstance(err, NotADirectoryError):
        return ["not_a_directory", None]
    return ["failed", err.strerror or type(err).__name__]


def info(path):
    st = os.stat(path)
    return [st.st_size, st.st_mtime]


def op_ls(req):
    path = place(req["path"])
    check(path)
    st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        return {"file": [st.st_size, st.st_mtime]}
    out = []
    for entry in os.scandir(path):
        if TEMP.fullmatch(entry.name):
            continue
        full = os.path.join(path, entry.name)
        try:
            if not inside(full):
                continue
            st = os.stat(full)
        except OSError:
            continue
        out.append([entry.name, stat.S_ISDIR(st.st_mode), st.st_size, st.st_mtime])
    return {"entries": out}


def op_get(req):
    path = place(req["path"])
    check(path)
    st = os.stat(path)
    if stat.S_ISDIR(st.st_mode):
        raise Fail("is_directory")
    if not stat.S_ISREG(st.st_mode):
        raise Fail("invalid_path", "not a regular file")
    limit = req.get("max")
    if limit is not None and st.st_size > limit:
        return {"too_large": st.st_size}
    with open(path, "rb") as handle:
        handle.seek(req["start"])
        data = handle.read(req["length"])
    return {"size": st.st_size, "data": base64.b64encode(data).decode("ascii"),
            "mtime": st.st_mtime}


def walk(top, searching, exclude):
    files = []
    for here, dirs, names in os.walk(top, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not (searching and d in exclude)
                         and not os.path.islink(os.path.join(here, d)))
        for name in names:
            if TEMP.fullmatch(name):
                continue
            full = os.path.join(here, name)
            if os.path.islink(full) and (searching or not inside(full)):
                continue
            try:
                st = os.stat(full)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                files.append((os.path.relpath(full, top), full, st))
    files.sort()
    return files


def page(items, start, budget):
    out, size, index = [], 0, start
    while index < len(items):
        size += len(json.dumps(items[index])) + 2
        if out and size > budget:
            break
        out.append(items[index])
        index += 1
    return {"items": out, "next": index if index < len(items) else None}


def op_walk(req):
    top = place(req["path"])
    check(top)
    if not os.path.isdir(top):
        return {"items": [], "next": None}
    items = [[rel, st.st_size, st.st_mtime] for rel, _, st in walk(top, False, ())]
    return page(items, req["start"], req["budget"])


def op_grep(req):
    top = place(req["path"])
    check(top)
    if not os.path.isdir(top):
        return {"items": [], "next": None}
    needle, context, cap = req["pattern"], req["context"], req["max_bytes"]
    items = []
    for rel, full, st in walk(top, True, set(req["exclude"])):
        if st.st_size > cap:
            items.append([rel, None])
            continue
        try:
            with open(full, "rb") as handle:
                raw = handle.read(cap + 1)
        except OSError:
            continue
        if b"\0" in raw[:8192] or (needle and needle.encode("utf-8") not in raw):
            continue
        lines = raw.decode("utf-8", "replace").splitlines()
        hits = [n for n, line in enumerate(lines, 1) if needle in line]
        if not hits:
            continue
        wanted = set()
        for n in hits:
            wanted.update(range(max(1, n - context), min(len(lines), n + context) + 1))
        items.append([rel, [[n, lines[n - 1]] for n in sorted(wanted)], hits])
    return page(items, req["start"], req["budget"])


def parent_ok(path):
    parent = os.path.dirname(path.rstrip("/")) or "/"
    probe = parent
    while not os.path.lexists(probe):
        probe = os.path.dirname(probe)
    check(probe)
    return parent


def op_put(req):
    path = place(req["path"])
    tmp = path + ".fathom-" + req["token"]
    if req["phase"] == "abort":
        if os.path.lexists(tmp):
            os.unlink(tmp)
        return {}
    if req["phase"] == "begin":
        parent = parent_ok(path)
        if os.path.lexists(path):
            check(path)
            if os.path.isdir(path):
                raise Fail("is_directory")
        if os.path.exists(parent) and not os.path.isdir(parent):
            raise Fail("not_a_directory")
        os.makedirs(parent, exist_ok=True)
        check(parent)
        mode = "wb"
    else:
        mode = "ab"
    with open(tmp, mode) as handle:
        handle.write(base64.b64decode(req["data"]))
    if req["phase"] == "commit" or req.get("last"):
        expect = req.get("expect")
        if expect is not None:
            try:
                with open(path, "rb") as handle:
                    now = hashlib.sha256(handle.read()).hexdigest()
            except OSError:
                now = None
            if now != expect:
                os.unlink(tmp)
                raise Fail("changed")
        if os.path.exists(path):
            shutil.copymode(path, tmp)
        os.replace(tmp, path)
    return {}


def op_delete(req):
    path = place(req["path"])
    parent_ok(path)
    if os.path.exists(path) or os.path.islink(path):
        check(os.path.dirname(path))
    if os.path.islink(path) and not inside(path):
        raise Fail("outside_root")
    st = os.lstat(path)
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)
    else:
        os.unlink(path)
    return {}


try:
    reply(globals()["op_" + req["op"]](req))
except Fail as fail:
    reply({"error": [fail.args[0], fail.args[1] if len(fail.args) > 1 else None]})
except OSError as err:
    reply({"error": oserror(err)})
'''

_LOADER = "import base64,sys;exec(base64.b64decode(sys.argv[1]).decode())"
_PROGRAM_B64 = base64.b64encode(_PROGRAM.encode("utf-8")).decode("ascii")
_NO_PYTHON = (
    "python3 is not available in the sandbox; BaseSandbox's file operations run a small "
    "Python program there: install python3 in the image, or override the file methods"
)

T = TypeVar("T")
_Step = Generator[dict[str, Any], dict[str, Any], T]
"""An operation: yields requests for the sandbox program, receives its replies."""


def _file_info(path: str, size: int, mtime: float) -> protocol.FileInfo:
    """The listing entry of a regular file from the sandbox's size and modification time."""
    return protocol.FileInfo(path=path, is_dir=False, size=size, modified_at=iso_timestamp(mtime))


def _error(reply: dict[str, Any], path: str | None) -> BackendError | None:
    raw = reply.get("error")
    if raw is None:
        return None
    kind, detail = raw
    try:
        return BackendError(ErrorKind(kind), path, detail)
    except ValueError:
        return BackendError(ErrorKind.FAILED, path, f"{kind}: {detail}")


class BaseSandbox(protocol.PlannedBackend, protocol.SandboxBackendProtocol):
    """A sandbox backend whose file operations all run through `execute`.

    Subclasses write `execute(command, *, timeout=None) -> ExecuteResponse` (and should
    give the provider's `id`); `aexecute` defaults to running `execute` in a thread.
    Everything else is built on them (see the module docstring for how requests travel
    safely). A subclass with a faster native transfer may override `upload_files` /
    `download_files` (and their async twins); `write`, `read`, `edit` and `delete` keep
    using the program. When the sandbox gives no answer (no `python3`, cut output), an
    operation fails with a `FAILED` error (a transfer: each file, logged).

    What the operations do: `ls` lists the entries directly under a path (a file lists
    itself); `read` pages like every backend's read, binary files come back whole (base64)
    and files over `max_file_size_bytes` are `TOO_LARGE`; `write` creates the file (and
    missing parent directories) or replaces it; `edit` replaces the file only if nobody
    changed it since it was read (else `CHANGED`); `delete` removes a file, a symlink
    itself, or a directory with all under it (not `/`); `glob` matches paths relative to
    the searched directory with fathom's glob dialect; `grep` finds a literal string,
    passing over `grep_exclude_dirs`, symlinks and binary files, and names files over
    `MAX_EDIT_BYTES` in `skipped`.

    Class attributes a subclass may set:

    - `root`: the directory in the sandbox that virtual `/` names (default `/`);
    - `grep_exclude_dirs`: directory names grep skips at any depth (default `(".git",)`);
    - `transfer_chunk_bytes`: file bytes per command (base64 grows them by a third; keep
      it well under the command length and output limits of `execute`);
    - `reply_budget_bytes`: how much listing or grep data one command may print;
    - `max_file_size_bytes`: the largest file `read` returns;
    - `wire_format`: `"fathom"` (the program above) or `"deepagents"` (the reference's commands and
      replies, for a provider written for the reference); `None` (the default) chooses
      `"deepagents"` for a subclass that defines its own `upload_files` or
      `download_files` with `root = "/"`, else `"fathom"`.
    """

    root: str = "/"
    grep_exclude_dirs: tuple[str, ...] = (".git",)
    transfer_chunk_bytes: int = 48_000
    reply_budget_bytes: int = 60_000
    max_file_size_bytes: int = 10 * 1024 * 1024
    wire_format: ClassVar[Literal["fathom", "deepagents"] | None] = None

    @abstractmethod
    def execute(self, command: str, *, timeout: int | None = None) -> protocol.ExecuteResponse:
        """Run `command` with a POSIX shell in the sandbox; never raise for a failing
        command (return its output and exit code)."""

    @property
    def id(self) -> str:
        """A unique identifier of this sandbox instance; override it with the provider's
        (the default is random, made once per instance)."""
        found = vars(self).get("_fathom_id")
        if found is None:
            found = vars(self)["_fathom_id"] = f"sandbox-{secrets.token_hex(6)}"
        return found

    # ------------------------------------------------------------------ which wire

    def _overrides(self, name: str) -> bool:
        """Whether this sandbox brings its own `name` (on its class or the instance)."""
        return name in vars(self) or getattr(type(self), name) is not getattr(BaseSandbox, name)

    def _speaks_reference(self) -> bool:
        """Whether the file operations use the Deep Agents wire (see `wire`)."""
        if self.wire_format is not None:
            return self.wire_format == "deepagents"
        native = self._overrides("upload_files") or self._overrides("download_files")
        return native and self.root == "/"

    def _plan(self, name: str, *args: Any, **kwargs: Any) -> protocol.Plan[Any]:
        if self._speaks_reference():
            found = reference_wire.plan(
                name, args, kwargs, exclude_dirs=tuple(self.grep_exclude_dirs),
                max_sniffed=self.max_file_size_bytes,
            )
            if found is not None:
                return found
        return super()._plan(name, *args, **kwargs)

    async def aupload_files(
        self, files: list[tuple[str, bytes]]
    ) -> list[protocol.FileUploadResponse]:
        """Async `upload_files`: a subclass's own sync `upload_files` in a worker thread,
        else the program's transfer over `aexecute`."""
        if self._overrides("upload_files"):
            return await asyncio.to_thread(self.upload_files, files)
        return await super().aupload_files(files)

    async def adownload_files(self, paths: list[str]) -> list[protocol.FileDownloadResponse]:
        """Async `download_files`: a subclass's own sync `download_files` in a worker
        thread, else the program's transfer over `aexecute`."""
        if self._overrides("download_files"):
            return await asyncio.to_thread(self.download_files, paths)
        return await super().adownload_files(paths)

    # ------------------------------------------------------------------ transport

    def _command(self, request: dict[str, Any]) -> str:
        payload = base64.b64encode(
            json.dumps({**request, "root": self.root}).encode("utf-8")
        ).decode("ascii")
        delimiter = f"FATHOM_EOF_{secrets.token_hex(8)}"
        assert delimiter not in payload  # `_` is not in the base64 alphabet
        lines = "\n".join(payload[i : i + 76] for i in range(0, len(payload), 76))
        return (
            f"python3 -c {shlex.quote(_LOADER)} {_PROGRAM_B64} <<'{delimiter}'\n"
            f"{lines}\n{delimiter}\n"
        )

    @staticmethod
    def _reply(response: protocol.ExecuteResponse) -> dict[str, Any]:
        for line in reversed(response.output.splitlines()):
            if line.startswith(_MARK):
                try:
                    data = json.loads(line[len(_MARK) :])
                except ValueError:
                    break
                if isinstance(data, dict):
                    return data
                break
        output = response.output.strip()
        if response.exit_code == 127 or "python3: not found" in output:
            raise protocol.OperationFailed(BackendError(ErrorKind.FAILED, detail=_NO_PYTHON))
        shown = output[:300] + ("..." if len(output) > 300 else "")
        raise protocol.OperationFailed(
            BackendError(
                ErrorKind.FAILED,
                detail=f"the sandbox gave no answer (exit code {response.exit_code}): {shown}",
            )
        )

    def _run(self, plan: protocol.Plan[T]) -> T:
        return protocol.drive(plan, self._send)

    async def _arun(self, plan: protocol.Plan[T]) -> T:
        return await protocol.adrive(plan, self._asend)

    def _send(self, request: Any) -> Any:
        if isinstance(request, reference_wire.Execute):
            return self.execute(request.command)
        if isinstance(request, reference_wire.Upload):
            return self.upload_files(request.files)
        return self._reply(self.execute(self._command(request)))

    async def _asend(self, request: Any) -> Any:
        if isinstance(request, reference_wire.Execute):
            return await self.aexecute(request.command)
        if isinstance(request, reference_wire.Upload):
            return await self.aupload_files(request.files)
        return self._reply(await self.aexecute(self._command(request)))

    @staticmethod
    def _relative(path: str) -> str:
        return path.lstrip("/")

    # ------------------------------------------------------------------ operations

    def _ls(self, path: str) -> _Step[protocol.LsResult]:
        if isinstance(shown := normalized(normalize_path, path), BackendError):
            return protocol.LsResult(error=shown)
        reply = yield {"op": "ls", "path": self._relative(shown)}
        if (error := _error(reply, shown)) is not None:
            return protocol.LsResult(error=error)
        if "file" in reply:
            return protocol.LsResult(entries=[_file_info(shown, *reply["file"])])
        prefix = shown.rstrip("/") + "/"
        entries = [
            protocol.FileInfo(path=prefix + name + "/", is_dir=True)
            if is_dir
            else _file_info(prefix + name, size, mtime)
            for name, is_dir, size, mtime in reply["entries"]
        ]
        entries.sort(key=lambda entry: entry["path"])
        return protocol.LsResult(entries=entries)

    def _get(self, shown: str, limit: int | None) -> _Step[bytes | BackendError]:
        """The whole file, in chunks; `TOO_LARGE` over `limit`."""
        data = bytearray()
        while True:
            request = {"op": "get", "path": self._relative(shown), "start": len(data),
                       "length": self.transfer_chunk_bytes, "max": limit}
            reply = yield request
            if (error := _error(reply, shown)) is not None:
                return error
            if "too_large" in reply:
                return BackendError(ErrorKind.TOO_LARGE, shown, count=reply["too_large"],
                                    limit=limit)
            chunk = base64.b64decode(reply["data"])
            data += chunk
            if not chunk or len(data) >= reply["size"]:
                return bytes(data)

    def _put(self, shown: str, content: bytes, expect: str | None = None) -> _Step[
        BackendError | None
    ]:
        """Write `content` to a temporary file beside the target, then rename it over."""
        token = secrets.token_hex(6)
        size = self.transfer_chunk_bytes
        chunks = [content[i : i + size] for i in range(0, len(content), size)] or [b""]
        for index, chunk in enumerate(chunks):
            last = index == len(chunks) - 1
            request = {"op": "put", "path": self._relative(shown), "token": token,
                       "phase": "begin" if index == 0 else "append", "last": last,
                       "expect": expect, "data": base64.b64encode(chunk).decode("ascii")}
            reply = yield request
            if (error := _error(reply, shown)) is not None:
                if index > 0:
                    yield {"op": "put", "path": self._relative(shown), "token": token,
                           "phase": "abort"}
                return error
        return None

    def _read(self, file_path: str, offset: int, limit: int) -> _Step[protocol.ReadResult]:
        if isinstance(shown := normalized(normalize_path, file_path), BackendError):
            return protocol.ReadResult(error=shown)
        got = yield from self._get(shown, self.max_file_size_bytes)
        if isinstance(got, BackendError):
            return protocol.ReadResult(error=got)
        return read_window(create_file_data(got), offset, limit, shown)

    def _write(self, file_path: str, content: str) -> _Step[protocol.WriteResult]:
        if isinstance(shown := normalized(normalize_file_path, file_path), BackendError):
            return protocol.WriteResult(error=shown)
        if not isinstance(content, str):
            return protocol.WriteResult(
                error=BackendError(ErrorKind.INVALID, shown, "content must be text")
            )
        error = yield from self._put(shown, content.encode("utf-8"))
        return protocol.WriteResult(error=error) if error else protocol.WriteResult(path=shown)

    def _edit(
        self, file_path: str, old: str, new: str, replace_all: bool
    ) -> _Step[protocol.EditResult]:
        if isinstance(shown := normalized(normalize_file_path, file_path), BackendError):
            return protocol.EditResult(error=shown)
        got = yield from self._get(shown, MAX_EDIT_BYTES)
        if isinstance(got, BackendError):
            return protocol.EditResult(error=got)
        outcome = edit_text(shown, create_file_data(got), old, new, replace_all)
        if isinstance(outcome, protocol.EditResult):
            return outcome
        text, count = outcome
        expect = hashlib.sha256(got).hexdigest()
        error = yield from self._put(shown, text.encode("utf-8"), expect)
        return (
            protocol.EditResult(error=error)
            if error
            else protocol.EditResult(path=shown, occurrences=count)
        )

    def _delete(self, file_path: str) -> _Step[protocol.DeleteResult]:
        if isinstance(shown := normalized(normalize_path, file_path), BackendError):
            return protocol.DeleteResult(error=shown)
        if shown == "/":
            return protocol.DeleteResult(
                error=BackendError(ErrorKind.INVALID, "/", "is the root directory")
            )
        reply = yield {"op": "delete", "path": self._relative(shown)}
        error = _error(reply, shown)
        return protocol.DeleteResult(error=error) if error else protocol.DeleteResult(path=shown)

    def _paged(self, request: dict[str, Any]) -> _Step[list[Any] | BackendError]:
        items: list[Any] = []
        start: int | None = 0
        while start is not None:
            reply = yield {**request, "start": start, "budget": self.reply_budget_bytes}
            if (error := _error(reply, None)) is not None:
                return error
            items += reply["items"]
            start = reply["next"]
        return items

    def _glob(self, pattern: str, path: str | None) -> _Step[protocol.GlobResult]:
        if isinstance(directory := normalized(normalize_dir, path), BackendError):
            return protocol.GlobResult(error=directory)
        budget = GlobBudget()
        try:
            glob_matches(pattern, "", budget)
        except GlobError as error:
            return protocol.GlobResult(error=pattern_error(pattern, error))
        items = yield from self._paged({"op": "walk", "path": self._relative(directory)})
        if isinstance(items, BackendError):
            return protocol.GlobResult(error=BackendError(items.kind, directory, items.detail))
        try:
            matches = [
                _file_info(directory + relative, size, mtime)
                for relative, size, mtime in items
                if glob_matches(pattern, relative, budget)
            ]
        except GlobError as error:
            return protocol.GlobResult(error=pattern_error(pattern, error))
        matches.sort(key=lambda entry: entry["path"])
        return protocol.GlobResult(matches=matches)

    def _grep(
        self, pattern: str, path: str | None, glob: str | None, max_count: int | None,
        context_lines: int,
    ) -> _Step[protocol.GrepResult]:
        if isinstance(directory := normalized(normalize_dir, path), BackendError):
            return protocol.GrepResult(error=directory)
        for name, value in (("max_count", max_count), ("context_lines", context_lines)):
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 0
            ):
                return protocol.GrepResult(
                    error=BackendError(ErrorKind.INVALID, detail=f"{name} must be an int >= 0")
                )
        if not isinstance(pattern, str):
            return protocol.GrepResult(
                error=BackendError(ErrorKind.INVALID, detail="pattern must be text")
            )
        budget = GlobBudget()
        try:
            if glob:
                glob_matches(glob, "", budget)
        except GlobError as error:
            return protocol.GrepResult(error=pattern_error(glob, error))
        request = {"op": "grep", "path": self._relative(directory), "pattern": pattern,
                   "context": context_lines, "max_bytes": MAX_EDIT_BYTES,
                   "exclude": list(self.grep_exclude_dirs)}
        items = yield from self._paged(request)
        if isinstance(items, BackendError):
            return protocol.GrepResult(error=BackendError(items.kind, directory, items.detail))
        matches: list[protocol.GrepMatch] = []
        skipped: list[str] = []
        try:
            for item in sorted(items, key=lambda entry: entry[0]):
                relative = item[0]
                if glob and not glob_matches(glob, relative, budget):
                    continue
                if item[1] is None:
                    skipped.append(directory + relative)
                    continue
                matches += _matches(directory + relative, item[1], item[2], context_lines)
                if max_count is not None and len(matches) > max_count:
                    return protocol.GrepResult(
                        matches=matches[:max_count], truncated=True, skipped=skipped or None
                    )
        except GlobError as error:
            return protocol.GrepResult(error=pattern_error(glob, error))
        return protocol.GrepResult(matches=matches, skipped=skipped or None)

    def _upload_files(
        self, files: list[tuple[str, bytes]]
    ) -> _Step[list[protocol.FileUploadResponse]]:
        responses = []
        for path, content in files:
            try:
                shown = normalize_file_path(path)
            except PathError:
                responses.append(protocol.FileUploadResponse(path, error=ErrorKind.INVALID))
                continue
            if not isinstance(content, bytes | bytearray | memoryview):
                responses.append(protocol.FileUploadResponse(path, error=ErrorKind.INVALID))
                continue
            error = yield from self._put(shown, bytes(content))
            responses.append(protocol.FileUploadResponse(path, error=error.kind if error else None))
        return responses

    def _download_files(self, paths: list[str]) -> _Step[list[protocol.FileDownloadResponse]]:
        responses = []
        for path in paths:
            try:
                shown = normalize_path(path)
            except PathError:
                responses.append(protocol.FileDownloadResponse(path, error=ErrorKind.INVALID))
                continue
            got = yield from self._get(shown, None)
            if isinstance(got, BackendError):
                responses.append(protocol.FileDownloadResponse(path, error=got.kind))
            else:
                responses.append(protocol.FileDownloadResponse(path, content=got))
        return responses


def _matches(
    path: str, lines: list[list[Any]], hits: list[int], context_lines: int
) -> list[protocol.GrepMatch]:
    """Grep matches of one file from the program's lines (hits and their context)."""
    text = {number: line for number, line in lines}
    hit_set = set(hits)
    found: list[protocol.GrepMatch] = []
    for number in hits:
        match = protocol.GrepMatch(path=path, line=number, text=text[number])
        if context_lines > 0:
            match["context_before"] = [
                {"line": n, "text": text[n]}
                for n in range(max(1, number - context_lines), number)
                if n not in hit_set and n in text
            ]
            match["context_after"] = [
                {"line": n, "text": text[n]}
                for n in range(number + 1, number + context_lines + 1)
                if n not in hit_set and n in text
            ]
        found.append(match)
    return found

