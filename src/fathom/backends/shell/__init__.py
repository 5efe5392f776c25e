"""Backends that run shell commands: on the host (`LocalShellBackend`), in a bubblewrap
sandbox (`BubblewrapSandbox`), and one sandbox per thread or assistant (`SandboxScope`).

Layer: foundation; it must not import capabilities, agent, project, server, protocols or cli.
"""

from fathom.backends.shell.bubblewrap import BubblewrapSandbox
from fathom.backends.shell.local import LocalShellBackend
from fathom.backends.shell.scope import SandboxScope

__all__ = ["BubblewrapSandbox", "LocalShellBackend", "SandboxScope"]
