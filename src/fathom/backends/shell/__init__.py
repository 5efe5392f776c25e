"""Backends that run shell commands: on the host (`LocalShellBackend`), in a bubblewrap
sandbox (`BubblewrapSandbox`), and one sandbox per thread or assistant (`SandboxScope`)."""

from fathom.backends.shell.bubblewrap import BubblewrapSandbox
from fathom.backends.shell.local import LocalShellBackend
from fathom.backends.shell.scope import SandboxScope

__all__ = ["BubblewrapSandbox", "LocalShellBackend", "SandboxScope"]
