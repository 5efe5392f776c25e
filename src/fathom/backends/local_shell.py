"""`fathom.backends.local_shell`: the module path the Deep Agents API uses for
`LocalShellBackend` (the class lives in `fathom.backends.shell.local`)."""

from fathom.backends.shell.local import LocalShellBackend

__all__ = ["DEFAULT_EXECUTE_TIMEOUT", "LocalShellBackend"]

DEFAULT_EXECUTE_TIMEOUT = 120
"""Seconds a command may run when no timeout is given: the default `timeout` of
`LocalShellBackend` and `BubblewrapSandbox` (the Deep Agents API's constant)."""
