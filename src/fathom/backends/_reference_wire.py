"""The Deep Agents wire: `BaseSandbox`'s file operations as the reference's providers expect.

A sandbox provider written for `deepagents.backends.sandbox.BaseSandbox` implements
`execute`, `id`, `upload_files` and `download_files`, and inherits the rest. Its tests (and
some providers' own) drive it with an `execute` double that answers the reference's
commands with the reference's replies, so fathom's own program (one JSON request, one
marked reply) would get no answer from it. This module speaks the reference's contract
instead, operation by operation, with fathom's own programs:

- the same calls in the same order: `ls`, `read`, `grep` and `glob` one `execute` each;
  `write` a small `execute` (create the parent directories) then `upload_files`; `edit` one
  `execute` (or, for old + new strings over `EDIT_INLINE_MAX_BYTES`, `upload_files` of two
  temporary files then one `execute`); `delete` an existence probe then `rm -rf`;
- the same replies: JSON lines for `ls` and `glob`, one JSON document for `read` and
  `edit`, `path NUL line:text` records for `grep`, exit codes for `delete`; and the same
  results and error texts for each (`File '<path>': file_not_found`, ...), each error a
  `BackendError` of the matching kind whose `message` is that text.

Safety is kept as in fathom's own wire. Every path, pattern and content reaches the
sandbox base64-encoded: the small ones as base64 literals inside the program (the base64
alphabet has no shell or Python metacharacter), the edit payload on stdin through a quoted
heredoc whose delimiter contains `_`, which base64 never produces. The only text quoted
for the shell rather than encoded is `delete`'s path (`shlex.quote`, after `--`), as the
probe's and `rm`'s exit codes are its reply. The programs are wrapped in double quotes and
contain no `"`, `$`, backtick or backslash, so the shell passes them through unchanged.
File content travels as bytes (`upload_files`) or base64 (`read`), so binary files stay
intact.

Where this differs from the reference, it is on the safe side: a missing `python3` is an
error that says so (not an empty listing), `delete("/")` is refused, a binary file found
by its content is returned only up to `max_binary_bytes` of the caller, an edit replaces
the file atomically (a temporary file renamed over it), and `grep` skips binary files,
symlinks, files over `MAX_EDIT_BYTES` (named in `skipped`) and never passes the pattern
through a shell.
"""

from __future__ import annotations

import base64
import json
import os
import shlex
from collections.abc import Generator
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from fathom.backends import protocol
from fathom.backends.errors import BackendError, ErrorKind
from fathom.backends.utils import MAX_EDIT_BYTES
from fathom.state import FileData

__all__ = [
    "EDIT_INLINE_MAX_BYTES",
    "EMPTY_FILE_REMINDER",
    "EMPTY_OLD_STRING_ERROR",
    "MAX_BINARY_BYTES",
    "MAX_OUTPUT_BYTES",
    "READ_COMMAND_TEMPLATE",
    "TRUNCATION_MSG",
    "Execute",
    "Upload",
    "plan",
]

MAX_BINARY_BYTES = 500 * 1024
"""The largest binary file (by extension) that `read` returns, base64-encoded."""

MAX_OUTPUT_BYTES = 500 * 1024
"""The most bytes of text one `read` returns; past it the page is cut and ends with
`TRUNCATION_MSG`."""

TRUNCATION_MSG = (
    "\n\n[Truncated: this page passed the sandbox's output size limit. Read on from a "
    "larger offset, or ask for fewer lines, to see the rest of the file.]"
)
"""What a `read` page cut at `MAX_OUTPUT_BYTES` ends with."""

EMPTY_FILE_REMINDER = "System reminder: File exists but has empty contents"
"""The content `read` returns for an empty file (the reference's marker)."""

EMPTY_OLD_STRING_ERROR = "Error: old_string cannot be empty. Provide the exact text to replace."
"""`edit`'s error for an empty `old_string` (the reference's text)."""

EDIT_INLINE_MAX_BYTES = 50_000
"""Old plus new strings (UTF-8 bytes) up to which `edit` sends them in its command; above
it they travel as two uploaded temporary files."""

_EDIT_TEMP_PREFIX = "/tmp/.deepagents_edit_"
_EDIT_EOF = "__FATHOM_EDIT_EOF__"
_NO_PYTHON = (
    "python3 is not available in the sandbox; BaseSandbox's file operations run small "
    "Python programs there: install python3 in the image, or override the file methods"
)

BINARY_SUFFIXES = frozenset({
    ".png", ".jpeg", ".jpg", ".webp", ".gif", ".heic", ".heif",  # images
    ".mp4", ".mpeg", ".mov", ".avi", ".flv", ".mpg", ".webm", ".wmv", ".3gpp", ".mkv",  # video
    ".wav", ".mp3", ".aiff", ".aac", ".ogg", ".flac",  # audio
    ".pdf", ".ppt", ".pptx",  # documents
})
"""Suffixes `read` returns as base64 whatever their bytes (images, video, audio, documents),
as the reference classifies them."""


@dataclass(frozen=True)
class Execute:
    """A step: run `command` with the sandbox's `execute` (`aexecute` when async)."""

    command: str


@dataclass(frozen=True)
class Upload:
    """A step: `upload_files(files)` on the sandbox (`aupload_files` when async)."""

    files: list[tuple[str, bytes]]


Step = Generator[Execute | Upload, Any, Any]


def _b64(text: str) -> str:
    return base64.b64encode(text.encode("utf-8", "surrogateescape")).decode("ascii")


def _fill(template: str, **values: object) -> str:
    """`template` with each `<<name>>` replaced (values are base64, ints or fixed words)."""
    for name, value in values.items():
        template = template.replace(f"<<{name}>>", str(value))
    return template


def _shell(program: str, redirect: str = "2>&1") -> str:
    """`python3 -c "<program>"`: safe because the program holds no `"`, `$`, backtick or
    backslash (checked for each program below)."""
    return f'python3 -c "{program}" {redirect}'


def _check_program(program: str) -> str:
    bad = set(program) & {'"', "$", "`", "\\"}
    if bad:  # a programming error in this module, found at import
        raise AssertionError(f"sandbox program holds shell-active characters: {sorted(bad)}")
    return program


def _fail(
    kind: ErrorKind, path: str | None, text: str, *, detail: str | None = None,
    count: int | None = None,
) -> BackendError:
    return BackendError(kind, path, detail, count=count, message=text)


def _no_python(response: protocol.ExecuteResponse) -> bool:
    output = response.output
    return response.exit_code == 127 and ("python3" in output or not output.strip())


def _json_reply(output: str) -> Any:
    """The program's JSON document: the whole output, else its last non-empty line (a
    login banner before it is ignored); `ValueError` when there is none."""
    text = output.strip()
    try:
        return json.loads(text)
    except ValueError:
        lines = [line for line in text.splitlines() if line.strip()]
        if len(lines) < 2:
            raise
        return json.loads(lines[-1])


def _shown(output: str) -> str:
    output = output.strip()
    return output[:200] if output else "(empty)"


# ------------------------------------------------------------------------------ ls

_LS_PROGRAM = _check_program("""
import base64, json, os
path = base64.b64decode('<<path_b64>>').decode('utf-8', 'surrogateescape')
def emit(record):
    print(json.dumps(record))
try:
    with os.scandir(path) as entries:
        found = sorted((entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries)
    for name, is_dir in found:
        emit({'path': os.path.join(path, name), 'is_dir': is_dir})
except FileNotFoundError:
    emit({'error': 'path_not_found'})
except NotADirectoryError:
    emit({'error': 'not_a_directory'})
except PermissionError:
    emit({'error': 'permission_denied'})
except OSError as exc:
    emit({'error': 'os_error: ' + (exc.strerror or type(exc).__name__)})
""")

_LS_KINDS = {
    "path_not_found": ErrorKind.NOT_FOUND,
    "not_a_directory": ErrorKind.NOT_A_DIRECTORY,
    "permission_denied": ErrorKind.PERMISSION,
}


def _ls(path: str) -> Step:
    response = yield Execute(_shell(_fill(_LS_PROGRAM, path_b64=_b64(path))))
    if _no_python(response):
        return protocol.LsResult(error=_fail(ErrorKind.FAILED, path, _NO_PYTHON))
    entries: list[protocol.FileInfo] = []
    error: str | None = None
    for line in response.output.strip().split("\n"):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if not isinstance(data, dict):
            continue
        if "error" in data:
            error = str(data["error"])
        elif isinstance(data.get("path"), str):
            entries.append(protocol.FileInfo(path=data["path"], is_dir=bool(data.get("is_dir"))))
    if error is not None:
        kind = _LS_KINDS.get(error, ErrorKind.FAILED)
        return protocol.LsResult(error=_fail(kind, path, f"Path '{path}': {error}", detail=error))
    return protocol.LsResult(entries=entries)


# ------------------------------------------------------------------------------ read

READ_COMMAND_TEMPLATE = _check_program("""
import base64, codecs, json, os, stat
MAX_OUTPUT_BYTES = 500 * 1024
MAX_BINARY_BYTES = 500 * 1024
MAX_SNIFFED_BINARY_BYTES = <<max_sniffed>>
COUNT_LINES_UP_TO = 1024 * 1024
NL = chr(10)
CR = chr(13)
TRUNCATION_MSG = base64.b64decode('<<truncation_b64>>').decode('utf-8')
EMPTY = base64.b64decode('<<empty_b64>>').decode('utf-8')
path = base64.b64decode('<<path_b64>>').decode('utf-8', 'surrogateescape')
binary_by_name = <<binary>>
offset = <<offset>>
limit = <<limit>>

def whole(cap):
    size = os.stat(path).st_size
    if size > cap:
        return {'error': 'Binary file exceeds maximum preview size of ' + str(cap) + ' bytes'}
    with open(path, 'rb') as handle:
        data = handle.read()
    return {'encoding': 'base64', 'content': base64.b64encode(data).decode('ascii')}

def count_lines():
    with open(path, 'r', encoding='utf-8', errors='surrogateescape', newline=None) as handle:
        return sum(1 for _ in handle)

def page():
    budget = MAX_OUTPUT_BYTES - len(TRUNCATION_MSG.encode('utf-8'))
    parts, used, seen, shown, cut, at_end = [], 0, 0, 0, False, False
    with open(path, 'r', encoding='utf-8', newline=None) as handle:
        while seen < offset:
            if handle.readline() == '':
                at_end = True
                break
            seen += 1
        while not at_end and shown < limit:
            raw = handle.readline()
            if raw == '':
                at_end = True
                break
            seen += 1
            text = raw.rstrip(NL).rstrip(CR)
            piece = text if shown == 0 else NL + text
            size = len(piece.encode('utf-8'))
            if used + size > budget:
                cut = True
                room = budget - used
                if room > 0:
                    parts.append(piece.encode('utf-8')[:room].decode('utf-8', 'ignore'))
                break
            parts.append(piece)
            used += size
            shown += 1
        if not at_end and not cut:
            try:
                at_end = handle.tell() == os.fstat(handle.fileno()).st_size
            except OSError:
                at_end = False
    if shown == 0 and not cut:
        return {'error': 'Line offset ' + str(offset) + ' exceeds file length ('
                + str(seen) + ' lines)'}
    if at_end:
        total = seen
    elif os.stat(path).st_size <= COUNT_LINES_UP_TO:
        total = count_lines()
    else:
        total = None
    if cut and shown == 0:
        shown = 1
    end = offset + shown
    content = ''.join(parts) + (TRUNCATION_MSG if cut else '')
    following = end if total is None or end < total else None
    return {'encoding': 'utf-8', 'content': content, 'total_lines': total,
            'start_line': offset + 1, 'end_line': end, 'next_offset': following}

def main():
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            return {'error': 'not_a_file'}
        if st.st_size == 0:
            return {'encoding': 'utf-8', 'content': EMPTY}
        if binary_by_name:
            return whole(MAX_BINARY_BYTES)
        with open(path, 'rb') as handle:
            head = handle.read(8192)
        try:
            codecs.getincrementaldecoder('utf-8')().decode(head, final=False)
        except UnicodeDecodeError:
            return whole(MAX_SNIFFED_BINARY_BYTES)
        if limit <= 0:
            return {'encoding': 'utf-8', 'content': '', 'no_lines_requested': True}
        try:
            return page()
        except UnicodeDecodeError:
            return whole(MAX_SNIFFED_BINARY_BYTES)
    except FileNotFoundError:
        return {'error': 'file_not_found'}
    except PermissionError:
        return {'error': 'permission_denied'}
    except IsADirectoryError:
        return {'error': 'not_a_file'}
    except OSError as exc:
        return {'error': 'os_error: ' + (exc.strerror or type(exc).__name__)}

print(json.dumps(main()))
""")
"""The program `read` runs. `MAX_BINARY_BYTES` and `MAX_OUTPUT_BYTES` in it are this
module's constants (a test keeps them equal)."""


def _read_kind(error: str) -> ErrorKind:
    if error.startswith("Line offset "):
        return ErrorKind.PAST_END
    if error.startswith("Binary file exceeds"):
        return ErrorKind.TOO_LARGE
    return {
        "file_not_found": ErrorKind.NOT_FOUND,
        "permission_denied": ErrorKind.PERMISSION,
        "not_a_file": ErrorKind.INVALID,
    }.get(error, ErrorKind.FAILED)


def read_bounds(offset: object, limit: object) -> tuple[int, int]:
    """`offset` and `limit` as ints floored at 0 (what makes them safe in the program)."""
    return max(int(offset), 0), max(int(limit), 0)  # type: ignore[call-overload]


def read_command(file_path: str, offset: int, limit: int, max_sniffed: int) -> str:
    """The command of one `read` (`offset` and `limit` floored at 0 and made ints here:
    that is what makes them safe to place in the program)."""
    first, count = read_bounds(offset, limit)
    binary = PurePosixPath(file_path).suffix.lower() in BINARY_SUFFIXES
    program = _fill(
        READ_COMMAND_TEMPLATE,
        path_b64=_b64(file_path), binary=binary, offset=first, limit=count,
        max_sniffed=int(max_sniffed), truncation_b64=_b64(TRUNCATION_MSG),
        empty_b64=_b64(EMPTY_FILE_REMINDER),
    )
    return _shell(program)


def _read(file_path: str, offset: int, limit: int, max_sniffed: int) -> Step:
    response = yield Execute(read_command(file_path, offset, limit, max_sniffed))
    if _no_python(response):
        return protocol.ReadResult(error=_fail(ErrorKind.FAILED, file_path, _NO_PYTHON))
    return parse_read(response.output, file_path)


def _unexpected_read(file_path: str, detail: str) -> protocol.ReadResult:
    text = f"File '{file_path}': unexpected server response: {detail}"
    return protocol.ReadResult(error=_fail(ErrorKind.FAILED, file_path, text, detail=detail))


def parse_read(output: str, file_path: str) -> protocol.ReadResult:
    """A `ReadResult` from the read program's JSON reply."""
    try:
        data = _json_reply(output)
    except ValueError:
        return _unexpected_read(file_path, _shown(output))
    if not isinstance(data, dict):
        return _unexpected_read(file_path, _shown(output))
    if "error" in data:
        error = str(data["error"])
        text = f"File '{file_path}': {error}"
        return protocol.ReadResult(error=_fail(_read_kind(error), file_path, text, detail=error))
    window = {name: data.get(name) for name in ("total_lines", "start_line", "end_line",
                                                "next_offset")}
    try:
        content, encoding = data["content"], data.get("encoding", "utf-8")
        if not isinstance(content, str) or encoding not in ("utf-8", "base64"):
            raise TypeError(f"content {type(content).__name__}, encoding {encoding!r}")
        for name, value in window.items():
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise TypeError(f"{name} is {value!r}")
        return protocol.ReadResult(
            file_data=FileData(content=content, encoding=encoding),
            no_lines_requested=bool(data.get("no_lines_requested")),
            **window,
        )
    except (KeyError, TypeError, ValueError) as error:
        return _unexpected_read(file_path, str(error))


# ------------------------------------------------------------------------------ write

_WRITE_PREFLIGHT = _check_program("""
import base64, os, sys
path = base64.b64decode('<<path_b64>>').decode('utf-8', 'surrogateescape')
parent = os.path.dirname(path) or '.'
try:
    if os.path.isdir(path):
        print('Error: ' + repr(path) + ' is a directory')
        sys.exit(1)
    os.makedirs(parent, exist_ok=True)
except OSError as exc:
    reason = exc.strerror or type(exc).__name__
    print('Error: cannot create the directory ' + repr(parent) + ': ' + reason)
    sys.exit(1)
""")


def write_preflight_command(file_path: str) -> str:
    """The command that creates `file_path`'s missing parent directories."""
    return _shell(_fill(_WRITE_PREFLIGHT, path_b64=_b64(file_path)))


def check_preflight(
    response: protocol.ExecuteResponse, file_path: str
) -> protocol.WriteResult | None:
    """The write's error when the preflight failed, else `None`."""
    if _no_python(response):
        return protocol.WriteResult(error=_fail(ErrorKind.FAILED, file_path, _NO_PYTHON))
    output = response.output
    if response.exit_code != 0 or "Error:" in output:
        text = output.strip() or f"Failed to write file '{file_path}'"
        lowered = text.lower()
        kind = (
            ErrorKind.EXISTS if "already exists" in lowered
            else ErrorKind.IS_DIRECTORY if "is a directory" in lowered
            else ErrorKind.PERMISSION if "permission denied" in lowered
            else ErrorKind.FAILED
        )
        return protocol.WriteResult(error=_fail(kind, file_path, text))
    return None


def _upload_kind(error: object) -> ErrorKind:
    try:
        return ErrorKind(str(error))
    except ValueError:
        return ErrorKind.FAILED


def _write(file_path: str, content: str) -> Step:
    if not isinstance(content, str):
        text = f"Failed to write file '{file_path}': content must be text"
        return protocol.WriteResult(error=_fail(ErrorKind.INVALID, file_path, text))
    failed = check_preflight((yield Execute(write_preflight_command(file_path))), file_path)
    if failed is not None:
        return failed
    responses = yield Upload([(file_path, content.encode("utf-8"))])
    if not responses:
        raise AssertionError(f"upload_files returned no response for {file_path!r}")
    if responses[0].error:
        text = f"Failed to write file '{file_path}': {responses[0].error}"
        return protocol.WriteResult(error=_fail(_upload_kind(responses[0].error), file_path, text))
    return protocol.WriteResult(path=file_path)


# ------------------------------------------------------------------------------ edit

_EDIT_FUNCTION = """
import base64, json, os, stat, sys, tempfile
NL = chr(10)
CRLF = chr(13) + chr(10)

def replace_in(path, old, new, replace_all):
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            return {'error': 'not_a_file'}
        with open(path, 'rb') as handle:
            raw = handle.read()
    except FileNotFoundError:
        return {'error': 'file_not_found'}
    except PermissionError:
        return {'error': 'permission_denied'}
    try:
        text = raw.decode('utf-8')
    except UnicodeDecodeError:
        return {'error': 'not_a_text_file'}
    lf_old, lf_new = old.replace(CRLF, NL), new.replace(CRLF, NL)
    count = 0
    for old_form, new_form in ((old, new), (lf_old.replace(NL, CRLF), lf_new.replace(NL, CRLF)),
                               (lf_old, lf_new)):
        count = text.count(old_form)
        if count:
            break
    if count == 0:
        return {'error': 'string_not_found'}
    if count > 1 and not replace_all:
        return {'error': 'multiple_occurrences', 'count': count}
    result = text.replace(old_form, new_form, -1 if replace_all else 1).encode('utf-8')
    try:
        put(path, result, st)
    except PermissionError:
        return {'error': 'permission_denied'}
    return {'count': count}

def put(path, data, st):
    real = os.path.realpath(path)
    try:
        fd, temp = tempfile.mkstemp(prefix='.fathom-edit-', dir=os.path.dirname(real))
    except OSError:
        with open(path, 'wb') as handle:
            handle.write(data)
        return
    try:
        with os.fdopen(fd, 'wb') as handle:
            handle.write(data)
        os.chmod(temp, stat.S_IMODE(st.st_mode))
        try:
            os.chown(temp, st.st_uid, st.st_gid)
        except OSError:
            pass
        os.replace(temp, real)
        temp = None
    finally:
        if temp is not None:
            try:
                os.unlink(temp)
            except OSError:
                pass
"""

_EDIT_COMMAND_TEMPLATE = _check_program(_EDIT_FUNCTION + """
payload = json.loads(base64.b64decode(sys.stdin.read()).decode('utf-8', 'surrogateescape'))
try:
    answer = replace_in(payload['path'], payload['old'], payload['new'], payload['replace_all'])
except OSError as exc:
    answer = {'error': 'os_error: ' + (exc.strerror or type(exc).__name__)}
print(json.dumps(answer))
""")

_EDIT_TMPFILE_TEMPLATE = _check_program(_EDIT_FUNCTION + """
old_path = base64.b64decode('<<old_b64>>').decode('utf-8')
new_path = base64.b64decode('<<new_b64>>').decode('utf-8')
target = base64.b64decode('<<target_b64>>').decode('utf-8', 'surrogateescape')
replace_all = <<replace_all>>
try:
    with open(old_path, 'rb') as handle:
        old = handle.read().decode('utf-8')
    with open(new_path, 'rb') as handle:
        new = handle.read().decode('utf-8')
except (OSError, UnicodeDecodeError) as exc:
    answer = {'error': 'temp_read_failed', 'detail': str(exc)}
else:
    try:
        answer = replace_in(target, old, new, replace_all)
    except OSError as exc:
        answer = {'error': 'os_error: ' + (exc.strerror or type(exc).__name__)}
finally:
    for temp in (old_path, new_path):
        try:
            os.remove(temp)
        except OSError:
            pass
print(json.dumps(answer))
""")


def edit_error(error: str, file_path: str, old: str, count: int | None) -> protocol.EditResult:
    """The reference's result for the edit program's error code `error`."""
    known = {
        "file_not_found": (ErrorKind.NOT_FOUND, f"Error: File '{file_path}' not found"),
        "permission_denied": (
            ErrorKind.PERMISSION, f"Error: Permission denied editing file '{file_path}'"
        ),
        "not_a_file": (ErrorKind.INVALID, f"Error: '{file_path}' is not a regular file"),
        "not_a_text_file": (ErrorKind.BINARY, f"Error: File '{file_path}' is not a text file"),
        "string_not_found": (ErrorKind.NO_MATCH, f"Error: String not found in file: '{old}'"),
        "multiple_occurrences": (
            ErrorKind.NOT_UNIQUE,
            f"Error: String '{old}' appears multiple times. Use replace_all=True to replace "
            "all occurrences.",
        ),
    }
    kind, text = known.get(error, (ErrorKind.FAILED, f"Error editing file '{file_path}': {error}"))
    return protocol.EditResult(error=_fail(kind, file_path, text, detail=error, count=count))


def _edit_reply(response: protocol.ExecuteResponse, file_path: str, old: str) -> (
    protocol.EditResult | None
):
    """The edit's result from the program's reply; `None` when the reply is no JSON."""
    if _no_python(response):
        return protocol.EditResult(error=_fail(ErrorKind.FAILED, file_path, _NO_PYTHON))
    try:
        data = _json_reply(response.output)
    except ValueError:
        return None
    if not isinstance(data, dict):
        detail = _shown(response.output)
        text = f"Error editing file '{file_path}': unexpected server response: {detail}"
        return protocol.EditResult(error=_fail(ErrorKind.FAILED, file_path, text, detail=detail))
    if "error" in data:
        count = data.get("count")
        return edit_error(str(data["error"]), file_path, old,
                           count if isinstance(count, int) else None)
    count = data.get("count", 1)
    return protocol.EditResult(path=file_path, occurrences=count if isinstance(count, int) else 1)


def _unexpected_edit(file_path: str, output: str) -> protocol.EditResult:
    detail = _shown(output)
    text = f"Error editing file '{file_path}': unexpected server response: {detail}"
    return protocol.EditResult(error=_fail(ErrorKind.FAILED, file_path, text, detail=detail))


def edit_inline_command(file_path: str, old: str, new: str, replace_all: bool) -> str:
    """The command of a small edit: the program, its request on stdin."""
    payload = json.dumps({"path": file_path, "old": old, "new": new,
                          "replace_all": bool(replace_all)})
    encoded = _b64(payload)
    lines = "\n".join(encoded[i : i + 76] for i in range(0, len(encoded), 76))
    return f"{_shell(_EDIT_COMMAND_TEMPLATE)} <<'{_EDIT_EOF}'\n{lines}\n{_EDIT_EOF}\n"


def _edit(file_path: str, old: str, new: str, replace_all: bool) -> Step:
    if not isinstance(old, str) or not isinstance(new, str):
        text = f"Error editing file '{file_path}': old_string and new_string must be text"
        return protocol.EditResult(error=_fail(ErrorKind.INVALID, file_path, text))
    if not old:
        return protocol.EditResult(error=_fail(ErrorKind.INVALID, file_path,
                                               EMPTY_OLD_STRING_ERROR))
    size = len(old.encode("utf-8", "surrogateescape")) + len(new.encode("utf-8", "surrogateescape"))
    if size <= EDIT_INLINE_MAX_BYTES:
        response = yield Execute(edit_inline_command(file_path, old, new, replace_all))
        answer = _edit_reply(response, file_path, old)
        return answer if answer is not None else _unexpected_edit(file_path, response.output)
    token = base64.b32encode(os.urandom(10)).decode("ascii").lower()
    old_temp, new_temp = f"{_EDIT_TEMP_PREFIX}{token}_old", f"{_EDIT_TEMP_PREFIX}{token}_new"
    responses = yield Upload([(old_temp, old.encode("utf-8")), (new_temp, new.encode("utf-8"))])
    if len(responses) < 2:
        text = f"Error editing file '{file_path}': upload returned no response"
        return protocol.EditResult(error=_fail(ErrorKind.FAILED, file_path, text))
    for response in responses:
        if response.error:
            text = f"Error editing file '{file_path}': {response.error}"
            return protocol.EditResult(error=_fail(_upload_kind(response.error), file_path, text))
    program = _fill(_EDIT_TMPFILE_TEMPLATE, old_b64=_b64(old_temp), new_b64=_b64(new_temp),
                    target_b64=_b64(file_path), replace_all=bool(replace_all))
    response = yield Execute(_shell(program))
    answer = _edit_reply(response, file_path, old)
    if answer is None:  # the program may not have run: remove the temporary files
        yield Execute(f"rm -f -- {shlex.quote(old_temp)} {shlex.quote(new_temp)}")
        return _unexpected_edit(file_path, response.output)
    return answer


# ------------------------------------------------------------------------------ delete


def _delete(file_path: str) -> Step:
    if not isinstance(file_path, str) or not file_path or "\x00" in file_path:
        text = f"Error: invalid path {file_path!r}"
        return protocol.DeleteResult(error=_fail(ErrorKind.INVALID, None, text))
    if file_path.strip("/") == "" or os.path.normpath(file_path) == "/":
        text = f"Error: refusing to delete '{file_path}', the root directory"
        return protocol.DeleteResult(error=_fail(ErrorKind.INVALID, file_path, text))
    quoted = shlex.quote(file_path)
    probe = yield Execute(f"test -e {quoted} || test -L {quoted}")
    if probe.exit_code is not None and probe.exit_code != 0:
        text = f"Error: '{file_path}' not found"
        return protocol.DeleteResult(error=_fail(ErrorKind.NOT_FOUND, file_path, text))
    removed = yield Execute(f"rm -rf -- {quoted}")
    if removed.exit_code == 0:
        return protocol.DeleteResult(path=file_path)
    reason = removed.output.strip() or "unknown error"
    kind = ErrorKind.PERMISSION if "permission denied" in reason.lower() else ErrorKind.FAILED
    text = f"Error deleting file '{file_path}': {reason}"
    return protocol.DeleteResult(error=_fail(kind, file_path, text, detail=reason))


# ------------------------------------------------------------------------------ matching

# How `glob` and grep's `glob` filter match, in the sandbox (so a search rooted at `/`
# sends back only the matches). The contract is the reference's: a pattern without `/`
# matches the basename at any depth, one with `/` the path relative to the searched
# directory (a leading `/` anchors it there); `{a,b}` alternatives (bounded), `[!..]` and
# `[^..]` negated classes, `**` any number of directories; a wildcard never matches a
# name starting with `.` (nor does `**` enter one) unless the pattern segment does.
_MATCHER = """
import fnmatch

def expand(pattern, bound):
    start = pattern.find('{')
    if start < 0:
        return [pattern]
    depth, end = 0, -1
    for index in range(start, len(pattern)):
        if pattern[index] == '{':
            depth += 1
        elif pattern[index] == '}':
            depth -= 1
            if depth == 0:
                end = index
                break
    if end < 0:
        return [pattern]
    head, body, tail = pattern[:start], pattern[start + 1:end], pattern[end + 1:]
    options, depth, current = [], 0, ''
    for char in body:
        if char == ',' and depth == 0:
            options.append(current)
            current = ''
            continue
        depth += (char == '{') - (char == '}')
        current += char
    options.append(current)
    if len(options) < 2:
        rest = expand(tail, bound)
        return None if rest is None else [head + '{' + body + '}' + item for item in rest]
    out = []
    for option in options:
        rest = expand(option + tail, bound)
        if rest is None:
            return None
        out.extend(head + item for item in rest)
        if len(out) > bound:
            return None
    return out

def classes(segment):
    out, index = '', 0
    while index < len(segment):
        if segment[index] == '[':
            close = segment.find(']', index + 2)
            if close > 0:
                body = segment[index + 1:close]
                if body.startswith('^'):
                    body = '!' + body[1:]
                out += '[' + body + ']'
                index = close + 1
                continue
        out += segment[index]
        index += 1
    return out

def name_matches(name, segment, dots):
    if dots and name.startswith('.') and not segment.startswith('.'):
        return False
    return fnmatch.fnmatchcase(name, classes(segment))

def path_matches(parts, segments):
    memo = {}
    def walk(i, j):
        key = (i, j)
        if key not in memo:
            memo[key] = step(i, j)
        return memo[key]
    def step(i, j):
        if j == len(segments):
            return i == len(parts)
        if segments[j] == '**':
            if j + 1 == len(segments):
                return i < len(parts) and not any(p.startswith('.') for p in parts[i:])
            if walk(i, j + 1):
                return True
            return i < len(parts) and not parts[i].startswith('.') and walk(i + 1, j)
        return i < len(parts) and name_matches(parts[i], segments[j], True) and walk(i + 1, j + 1)
    return walk(0, 0)

def matches(relative, pattern, expansions, dots):
    if '/' not in pattern:
        name = relative.rsplit('/', 1)[-1]
        return any(name_matches(name, option, dots) for option in expansions)
    parts = [part for part in relative.split('/') if part]
    for option in expansions:
        pieces = option.lstrip('/').split('/')
        segments = [piece for piece in pieces if piece]
        if len(pieces) > 1 and pieces[-1] == '' and (not segments or segments[-1] != '**'):
            continue
        collapsed = []
        for segment in segments:
            if not (segment == '**' and collapsed and collapsed[-1] == '**'):
                collapsed.append(segment)
        if path_matches(parts, collapsed):
            return True
    return False

def climbs(pattern):
    return any(piece == '..' for piece in pattern.replace(chr(92), '/').split('/'))
"""


# ------------------------------------------------------------------------------ grep

_SKIPPED_MARK = "@@fathom-skipped@@"

_GREP_PROGRAM = _check_program(_MATCHER + """
import base64, os, stat, sys
# A literal search (no regex); records as grep -rHnFZ prints them: path, NUL, line, ':', text.
root = base64.b64decode('<<path_b64>>').decode('utf-8', 'surrogateescape')
wanted = [n.encode('utf-8', 'surrogateescape') for n in
           base64.b64decode('<<pattern_b64>>').decode('utf-8', 'surrogateescape').split(chr(10))]
include = base64.b64decode('<<glob_b64>>').decode('utf-8', 'surrogateescape')
excluded = set(n for n in base64.b64decode('<<exclude_b64>>').decode('utf-8').split(chr(0)) if n)
cap = <<max_count>>
MAX_BYTES = <<max_bytes>>
out = sys.stdout.buffer
written = 0

def fail(message):
    sys.stderr.write(message + chr(10))
    sys.exit(2)

def skipped(shown):
    out.write(('<<skipped_mark>>' + shown).encode('utf-8', 'surrogateescape') + bytes([10]))

def search(full, shown):
    global written
    if chr(10) in shown:
        skipped(shown.replace(chr(10), '?'))
        return False
    try:
        st = os.stat(full)
        if st.st_size > MAX_BYTES:
            skipped(shown)
            return False
        with open(full, 'rb') as handle:
            data = handle.read()
    except OSError:
        return False
    if bytes([0]) in data[:8192]:
        return False
    prefix = shown.encode('utf-8', 'surrogateescape') + bytes([0])
    lines = data.split(bytes([10]))
    if data.endswith(bytes([10])):
        lines.pop()
    for number, line in enumerate(lines, 1):
        if any(piece in line for piece in wanted):
            out.write(prefix + str(number).encode() + b':' + line + bytes([10]))
            written += 1
            if cap is not None and written > cap:
                return True
    return False

if include and '/' in include and climbs(include):
    fail('glob contains path traversal')
expansions = expand(include, 1000) if include else None
if include and expansions is None:
    fail('glob has too many alternatives')
if os.path.isdir(root):
    def refuse(error):
        if os.path.normpath(getattr(error, 'filename', '') or '') == os.path.normpath(root):
            fail(type(error).__name__ + ': ' + str(error))
    done = False
    for here, dirs, files in os.walk(root, onerror=refuse):
        dirs[:] = sorted(d for d in dirs if d not in excluded)
        for name in sorted(files):
            full = os.path.join(here, name)
            if os.path.islink(full):
                continue
            relative = os.path.relpath(full, root).replace(os.sep, '/')
            if include and not matches(relative, include, expansions, '/' in include):
                continue
            try:
                if not stat.S_ISREG(os.stat(full).st_mode):
                    continue
            except OSError:
                continue
            if search(full, os.path.join(root, relative)):
                done = True
                break
        if done:
            break
elif os.path.exists(root):
    search(root, root)
out.flush()
""")


def _grep_excluded(path: str | None, names: tuple[str, ...]) -> tuple[str, ...]:
    """The names to skip, less the searched directory's own (a search of `.git` searches
    it)."""
    own = PurePosixPath(path or ".").name
    return tuple(name for name in names if name != own)


def grep_command(
    pattern: str, path: str | None, glob: str | None, max_count: int | None,
    exclude_dirs: tuple[str, ...],
) -> str:
    """The command of one `grep`."""
    program = _fill(
        _GREP_PROGRAM,
        path_b64=_b64(path or "."), pattern_b64=_b64(pattern), glob_b64=_b64(glob or ""),
        exclude_b64=_b64("\0".join(_grep_excluded(path, exclude_dirs))),
        max_count="None" if max_count is None else int(max_count),
        max_bytes=MAX_EDIT_BYTES, skipped_mark=_SKIPPED_MARK,
    )
    return _shell(program)


def parse_grep(
    response: protocol.ExecuteResponse, path: str | None, max_count: int | None
) -> protocol.GrepResult:
    """A `GrepResult` from `path NUL line:text` records (the reference's reply)."""
    shown = path or "."
    if _no_python(response):
        return protocol.GrepResult(error=_fail(ErrorKind.FAILED, shown, _NO_PYTHON))
    output = response.output.rstrip("\n")
    if response.exit_code is not None and response.exit_code != 0:
        detail = output.strip() or f"exit code {response.exit_code}"
        return protocol.GrepResult(error=_fail(ErrorKind.FAILED, shown, f"Path '{shown}': {detail}",
                                               detail=detail))
    if not output:
        return protocol.GrepResult(matches=[])
    matches: list[protocol.GrepMatch] = []
    skipped: list[str] = []
    unparsed: str | None = None
    for line in output.split("\n"):
        if line.startswith(_SKIPPED_MARK):
            skipped.append(line[len(_SKIPPED_MARK) :])
            continue
        try:
            file_path, rest = line.split("\0", 1)
            number, text = rest.split(":", 1)
            matches.append(protocol.GrepMatch(path=file_path, line=int(number), text=text))
        except ValueError:
            unparsed = line
    if unparsed is not None and not matches:
        return protocol.GrepResult(error=_fail(ErrorKind.FAILED, shown,
                                               f"Path '{shown}': {unparsed}", detail=unparsed))
    if max_count is not None and len(matches) > max_count:
        return protocol.GrepResult(matches=matches[:max_count], truncated=True,
                                   skipped=skipped or None)
    return protocol.GrepResult(matches=matches, skipped=skipped or None)


def _grep(
    pattern: str, path: str | None, glob: str | None, max_count: int | None,
    exclude_dirs: tuple[str, ...],
) -> Step:
    if not isinstance(pattern, str):
        text = f"Path '{path or '.'}': the pattern must be text"
        return protocol.GrepResult(error=_fail(ErrorKind.INVALID, path, text))
    if max_count is not None and (isinstance(max_count, bool) or not isinstance(max_count, int)
                                  or max_count < 0):
        text = f"Path '{path or '.'}': max_count must be an int >= 0"
        return protocol.GrepResult(error=_fail(ErrorKind.INVALID, path, text))
    response = yield Execute(grep_command(pattern, path, glob, max_count, exclude_dirs))
    return parse_grep(response, path, max_count)


# ------------------------------------------------------------------------------ glob

_GLOB_PROGRAM = _check_program(_MATCHER + """
import base64, json, os, time
root = base64.b64decode('<<path_b64>>').decode('utf-8', 'surrogateescape')
pattern = base64.b64decode('<<pattern_b64>>').decode('utf-8', 'surrogateescape')
MAX_EXPANSIONS = 1000
MAX_MATCHES = 10000
TIME_BUDGET = 5.0
walk_errors = []

def emit(record):
    print(json.dumps(record))

def main():
    try:
        real_root = os.path.realpath(root)
        os.chdir(root)
    except FileNotFoundError:
        return emit({'error': 'path_not_found'})
    except NotADirectoryError:
        return emit({'error': 'not_a_directory'})
    except PermissionError:
        return emit({'error': 'permission_denied'})
    if climbs(pattern):
        return emit({'error': 'invalid_pattern'})
    expansions = expand(pattern, MAX_EXPANSIONS)
    if expansions is None:
        return emit({'error': 'pattern_too_broad'})
    inside = real_root.rstrip(os.sep) + os.sep
    deadline = time.monotonic() + TIME_BUDGET
    found, truncated = [], False
    def note(error):
        walk_errors.append(type(error).__name__ + ':' + str(getattr(error, 'filename', '?')))
    try:
        for here, dirs, files in os.walk('.', onerror=note):
            if time.monotonic() > deadline:
                truncated = True
                break
            if here == '.' and real_root == os.sep:
                dirs[:] = [d for d in dirs if d not in ('proc', 'sys', 'dev')]
            for name in files:
                if time.monotonic() > deadline or len(found) >= MAX_MATCHES:
                    truncated = True
                    break
                relative = os.path.join(here, name).replace(os.sep, '/')[2:]
                if not matches(relative, pattern, expansions, True):
                    continue
                real = os.path.realpath(relative)
                if real != real_root and not real.startswith(inside):
                    continue
                if os.path.isfile(real):
                    found.append(relative)
            if truncated:
                break
    except Exception as exc:  # boundary: a walk that fails part way reports what it found
        walk_errors.append(type(exc).__name__ + ':' + str(exc)[:100])
    for relative in sorted(found):
        emit({'path': relative, 'is_dir': False})
    if walk_errors:
        emit({'warning': 'walk_errors', 'count': len(walk_errors), 'sample': walk_errors[:5]})
    if truncated:
        emit({'warning': 'truncated'})

try:
    main()
except Exception as exc:  # boundary: the program's own failure is its answer
    emit({'error': 'internal_error: ' + type(exc).__name__ + ': ' + str(exc)[:200]})
""")

_GLOB_KINDS = {
    "path_not_found": ErrorKind.NOT_FOUND,
    "not_a_directory": ErrorKind.NOT_A_DIRECTORY,
    "permission_denied": ErrorKind.PERMISSION,
    "invalid_pattern": ErrorKind.INVALID,
    "pattern_too_broad": ErrorKind.LIMIT,
}


def glob_root(path: str | None) -> str:
    """The searched directory as an absolute path (`/` when none is given)."""
    if not path:
        return "/"
    return path if path.startswith("/") else f"/{path}"


def glob_command(pattern: str, root: str) -> str:
    """The command of one `glob` under the absolute directory `root`."""
    return _shell(_fill(_GLOB_PROGRAM, path_b64=_b64(root), pattern_b64=_b64(pattern)))


def _glob_failure(root: str, text: str, kind: ErrorKind = ErrorKind.FAILED) -> (
    protocol.GlobResult
):
    return protocol.GlobResult(error=_fail(kind, root, f"Path '{root}': {text}", detail=text))


def parse_glob(response: protocol.ExecuteResponse, root: str) -> protocol.GlobResult:
    """A `GlobResult` (absolute paths) from the glob program's JSON lines.

    Any line that is not a record is an error, not something to skip: a crashed program
    must not read as a search that found nothing. The one exception is a last line cut
    by the transport (`response.truncated`), which may be half a record.
    """
    if _no_python(response):
        return protocol.GlobResult(error=_fail(ErrorKind.FAILED, root, _NO_PYTHON))
    output = response.output.strip()
    if response.exit_code is not None and response.exit_code != 0:
        detail = output[:200] if output else f"exit code {response.exit_code}"
        return _glob_failure(root, f"glob helper failed: {detail}")
    if not output:
        return protocol.GlobResult(
            matches=[], truncated=response.truncated,
            truncation_reason="transport" if response.truncated else None,
        )
    found: list[protocol.FileInfo] = []
    unparsed: list[str] = []
    error: str | None = None
    truncated = response.truncated
    reason: protocol.GlobTruncationReason | None = "transport" if response.truncated else None
    lines = output.split("\n")
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            if not (response.truncated and index == len(lines) - 1):
                unparsed.append(line)
        elif "error" in data:
            error = str(data["error"])
        elif "warning" in data:
            truncated = True
            if data.get("warning") == "walk_errors":
                reason = "unreadable"
            elif reason is None:
                reason = "budget"
        elif isinstance(data.get("path"), str):
            relative = data["path"]
            shown = relative if relative.startswith("/") else f"{root.rstrip('/')}/{relative}"
            found.append(protocol.FileInfo(path=shown, is_dir=bool(data.get("is_dir", False))))
        else:
            unparsed.append(line)
    if error is not None:
        return _glob_failure(root, error, _GLOB_KINDS.get(error, ErrorKind.FAILED))
    if unparsed:
        return _glob_failure(root, f"glob helper emitted unexpected output: {unparsed[0][:200]}")
    return protocol.GlobResult(matches=found, truncated=truncated, truncation_reason=reason)


def _glob(pattern: str, path: str | None) -> Step:
    root = glob_root(path)
    if not isinstance(pattern, str):
        return _glob_failure(root, "the pattern must be text", ErrorKind.INVALID)
    response = yield Execute(glob_command(pattern, root))
    return parse_glob(response, root)


# ------------------------------------------------------------------------------ plans


def plan(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], *,
         exclude_dirs: tuple[str, ...], max_sniffed: int) -> Step | None:
    """The plan of the file operation `name` over this wire; `None` for an operation it
    does not define (`upload_files`, `download_files`: the provider's own)."""
    if name == "ls":
        return _ls(*args)
    if name == "read":
        return _read(*args, max_sniffed=max_sniffed)
    if name == "write":
        return _write(*args)
    if name == "edit":
        return _edit(*args)
    if name == "delete":
        return _delete(*args)
    if name == "glob":
        return _glob(*args)
    if name == "grep":
        pattern, path, glob = [*args, None, None][:3]
        return _grep(pattern, path, glob, kwargs.get("max_count"), exclude_dirs)
    return None
