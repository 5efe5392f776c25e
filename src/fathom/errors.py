"""The root of fathom's exceptions.

Every exception class fathom defines derives from `FathomError`, so a caller can catch
"anything fathom raised on purpose" in one clause. Where callers expect a builtin kind as
well, a class derives from both (`class ConfigError(FathomError, ValueError)`), so
`except ValueError` keeps working.

Inside fathom, an expected failure is a value or a type (a backend result carries a
`fathom.backends.errors.BackendError` with its `ErrorKind`); words are written once, at the
edge that talks to the model (`fathom.middleware.filesystem.answers`) or to the person.

Owns: `FathomError`. Layer: core, the lowest; it imports nothing of fathom.
"""

from __future__ import annotations

__all__ = ["FathomError"]


class FathomError(Exception):
    """An error fathom raises on purpose; its message says what happened and what to do."""
