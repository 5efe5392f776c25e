"""The `fathom` command in scripts and pipes: a task read from stdin, `--version`, a checked
`--project`, and a quiet exit when the reader of stdout goes away.

- `fathom run -` reads the task from stdin, and so do `fathom run` without a task and plain
  `fathom` when stdin is not a terminal (`echo "fix the tests" | fathom`): the whole piped
  text is one task, run as `fathom run` runs it. Empty input is a usage error (exit 2).
- `fathom --version` prints the installed package's version (`importlib.metadata`).
- `--project DIR` must name an existing directory (exit 2 with one line otherwise).
- When stdout is a pipe whose reader has closed (`fathom threads | head -1`), the command
  stops writing and exits with status 141 (128 + SIGPIPE), as a program killed by SIGPIPE
  would: the shell and `set -o pipefail` see the same status as for other Unix tools, and
  no `BrokenPipeError` traceback appears.

Only the standard library is imported here: `fathom --help` and `--version` stay quick.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from fathom.errors import FathomError

__all__ = [
    "EXIT_CLOSED_PIPE",
    "STDIN_TASK",
    "ScriptingError",
    "VersionAction",
    "check_project",
    "package_version",
    "quiet_on_closed_pipe",
    "read_stdin_task",
    "stdin_is_piped",
]

EXIT_CLOSED_PIPE = 141
"""The exit status after the reader of stdout closed it: 128 + SIGPIPE (13)."""

STDIN_TASK = "-"
"""`fathom run -`: the task is read from standard input."""

_DISTRIBUTION = "fathom"


class ScriptingError(FathomError):
    """A usage mistake in how the command was scripted; the message says what to do."""


def package_version() -> str:
    """The installed `fathom` package's version, from its metadata."""
    from importlib import metadata

    try:
        return metadata.version(_DISTRIBUTION)
    except metadata.PackageNotFoundError:  # run from a source tree that is not installed
        from fathom import __version__

        return __version__


class VersionAction(argparse.Action):
    """`--version`: prints `fathom VERSION` and exits 0; the version is looked up only then."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: Any = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0,
                         help=help or "print the version and exit")  # fmt: skip

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:  # fmt: skip
        print(f"{parser.prog} {package_version()}")
        parser.exit()


def stdin_is_piped(stdin: TextIO | None = None) -> bool:
    """Whether standard input is a pipe or file (not a terminal) that can hold a task."""
    stream = stdin if stdin is not None else sys.stdin
    if stream is None:
        return False
    try:
        return not os.isatty(stream.fileno())
    except (AttributeError, OSError, ValueError):  # closed or replaced stdin
        return False


def read_stdin_task(stdin: TextIO | None = None) -> str:
    """The whole of standard input as one task, surrounding blank space removed.

    Raises `ScriptingError` when it holds nothing but blank space.
    """
    stream = stdin if stdin is not None else sys.stdin
    text = stream.read() if stream is not None else ""
    task = text.strip()
    if not task:
        raise ScriptingError(
            "no task on standard input (it was empty); pipe one in, e.g. "
            "`echo \"fix the failing test\" | fathom run -`, or pass it: `fathom run \"...\"`"
        )
    return task


def check_project(value: str | None) -> str | None:
    """Why `--project value` cannot be used, or `None` when it names a directory (or is unset)."""
    if value is None:
        return None
    path = Path(value).expanduser()
    if not path.exists():
        return f"--project {value}: no such directory"
    if not path.is_dir():
        return f"--project {value}: not a directory"
    if not os.access(path, os.R_OK | os.X_OK):
        return f"--project {value}: permission denied"
    return None


def _silence_stdout() -> None:
    """Point stdout's file descriptor at /dev/null, so the interpreter's final flush of what
    is still buffered cannot fail again (and print "Exception ignored ... BrokenPipeError")."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (AttributeError, OSError, ValueError):  # stdout closed or replaced
        pass


def quiet_on_closed_pipe(entry: Callable[[], int]) -> int:
    """Run `entry` and flush stdout; a closed stdout pipe ends it with `EXIT_CLOSED_PIPE`.

    The flush is inside, even when `entry` exits (argparse's `--help` raises SystemExit), so
    output still buffered fails here rather than in the interpreter's shutdown, where it
    could not be caught.
    """
    try:
        try:
            code = entry()
        finally:
            sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_CLOSED_PIPE
    return code
