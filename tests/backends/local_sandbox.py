"""`LocalShellSandbox`: the smallest real `BaseSandbox` — only `execute`, over `/bin/sh`.

Commands run on this host with the working directory `root`; `BaseSandbox.root` maps the
virtual `/` to that directory, so the file operations (all of which `BaseSandbox` builds
on `execute`) see the directory as the sandbox's filesystem. A hosted sandbox would keep
the default `root = "/"`; a temporary directory keeps a test away from the host's files.
"""

from __future__ import annotations

import os
import subprocess

from fathom.backends import BaseSandbox
from fathom.backends.protocol import ExecuteResponse


class LocalShellSandbox(BaseSandbox):
    """A `BaseSandbox` whose only method is `execute`; counts the commands it ran."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = os.path.realpath(root)
        self.commands = 0

    def execute(self, command: str, *, timeout: int | None = None) -> ExecuteResponse:
        self.commands += 1
        done = subprocess.run(
            ["/bin/sh", "-c", command],
            cwd=self.root,
            capture_output=True,
            timeout=timeout or 60,
            env={"PATH": "/usr/local/bin:/usr/bin:/bin"},
            check=False,
        )
        output = (done.stdout + done.stderr).decode("utf-8", errors="replace")
        return ExecuteResponse(output=output, exit_code=done.returncode)
