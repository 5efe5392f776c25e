"""Running a sandbox check as an ordinary user from a test suite that runs as root.

`as_ordinary_user(script, *args)` starts a child Python as a throwaway uid (`setpriv`, no
supplementary groups) that imports this checkout's `fathom`, runs `script` and returns the
JSON object its last output line holds. A test calls it only when the suite runs as root
(`ROOT`), and skips with `ORDINARY_USER_SKIP` otherwise: an unprivileged run is already
the ordinary-user case.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import fathom

ROOT = os.geteuid() == 0
USER_UID = 23456
"""The throwaway uid (no account needs to exist for it)."""
ORDINARY_USER_SKIP = "starting a throwaway uid needs root; this run is already unprivileged"
_SOURCE = str(Path(fathom.__file__).resolve().parent.parent)
"""The directory this checkout's `fathom` package is imported from."""


@contextmanager
def user_workspace(uid: int = USER_UID) -> Iterator[Path]:
    """A workspace owned by `uid`, under a directory every user can traverse."""
    base = Path(tempfile.mkdtemp(prefix="fathom-user-", dir="/tmp"))
    try:
        base.chmod(0o755)
        (base / "ws").mkdir()
        if ROOT:
            os.chown(base, uid, uid)
            os.chown(base / "ws", uid, uid)
        yield base / "ws"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def as_ordinary_user(
    script: str, *args: str, uid: int = USER_UID, prefix: list[str] | None = None,
    timeout: float = 300,
) -> dict[str, Any]:
    """Run `script` (Python) as `uid` with `args` in `sys.argv[1:]`; its last line's JSON.

    `prefix` is prepended to the command line (a wrapper that puts the child into a
    cgroup first, say); it runs as root and must `exec "$@"`."""
    home = tempfile.mkdtemp(prefix="fathom-home-", dir="/tmp")
    os.chown(home, uid, uid)
    try:
        child = subprocess.run(
            [
                *(prefix or []),
                "/usr/bin/setpriv",
                f"--reuid={uid}",
                f"--regid={uid}",
                "--clear-groups",
                "--",
                sys.executable,
                "-c",
                script,
                *args,
            ],
            capture_output=True,
            text=True,
            env={"PATH": "/usr/bin:/bin", "HOME": home, "PYTHONPATH": _SOURCE},
            timeout=timeout,
            check=False,
        )
    finally:
        shutil.rmtree(home, ignore_errors=True)
    assert child.returncode == 0, child.stderr[-4000:]
    return json.loads(child.stdout.splitlines()[-1])
