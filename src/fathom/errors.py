"""The root of fathom's exceptions.

Every exception class fathom defines derives from `FathomError`, so a caller can catch
"anything fathom raised on purpose" in one clause. Where callers expect a builtin kind as
well, a class derives from both (`class ConfigError(FathomError, ValueError)`), so
`except ValueError` keeps working.

Inside fathom, an expected failure is a value or a type (a backend result carries a
`fathom.backends.errors.BackendError` with its `ErrorKind`); words are written once, at the
edge that talks to the model (`fathom.middleware.filesystem.answers`) or to the person.

Owns: `FathomError`, and the messages of two programmer errors written once:
`require_at_least_one` (a count below 1) and `wrong_type` (an argument of the wrong type).
Layer: core, the lowest; it imports nothing of fathom.
"""

from __future__ import annotations

__all__ = ["FathomError", "require_at_least_one", "wrong_type"]


class FathomError(Exception):
    """An error fathom raises on purpose; its message says what happened and what to do."""


def require_at_least_one(name: str, value: int) -> None:
    """Raise `ValueError` naming `name` when a count argument is below 1 (a programmer error)."""
    if value < 1:
        raise ValueError(f"{name} must be at least 1, not {value!r}")


def wrong_type(where: str, value: object, expected: str) -> TypeError:
    """The error for `where` (`skills[2]`, `workflow`) holding `value`, which is not `expected`."""
    return TypeError(f"{where} is a {type(value).__name__}; expected {expected}")
