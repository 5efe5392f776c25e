"""`fathom.backends.local_shell`: the module path the Deep Agents API uses for
`LocalShellBackend` (the class lives in `fathom.backends.shell.local`)."""

from fathom.backends.shell.local import LocalShellBackend

__all__ = ["LocalShellBackend"]
