"""`fathom.backends.local_shell`: the module path the Deep Agents API uses for
`LocalShellBackend` (the class lives in `fathom.backends.shell.local`)."""

from fathom.backends.shell.local import DEFAULT_EXECUTE_TIMEOUT, LocalShellBackend

__all__ = ["DEFAULT_EXECUTE_TIMEOUT", "LocalShellBackend"]
