"""Profile plugins: installed packages register profiles through entry points.

Each entry point in the groups below names a callable taking no arguments that calls
`register_harness_profile` / `register_provider_profile`. fathom's own groups come with
the reference package's, so a plugin written for it is discovered too. Plugins load once,
on the first registry access; a broken plugin is logged and skipped, not fatal.
"""

from __future__ import annotations

import logging
import threading
import warnings
from importlib.metadata import entry_points

__all__ = ["HARNESS_GROUPS", "PROVIDER_GROUPS", "load_plugins"]

logger = logging.getLogger(__name__)

PROVIDER_GROUPS = ("fathom.provider_profiles", "deepagents.provider_profiles")
HARNESS_GROUPS = ("fathom.harness_profiles", "deepagents.harness_profiles")

_state = {"loaded": False, "loading": False}
_LOCK = threading.RLock()
"""Guards both the plugin run and the registries (re-entrant: plugins register while it
is held), so there is one lock order."""


def _run_group(group: str) -> None:
    try:
        found = entry_points(group=group)
    except Exception as exc:
        logger.warning("could not list %s entry points: %s", group, exc)
        return
    for ep in found:
        where = f"{group} plugin {ep.name!r} ({ep.value})"
        try:
            register = ep.load()
            if not callable(register):
                raise TypeError("the entry point is not a callable")
            register()
        except Exception as exc:
            message = f"Skipped {where}: {type(exc).__name__}: {exc}"
            logger.exception(message)
            warnings.warn(message, stacklevel=3)


def load_plugins(*, again: bool = False) -> None:
    """Run every profile plugin once (`again=True` runs them again, for newly installed ones).

    Provider plugins run before harness plugins. A registration a plugin makes while this
    runs goes straight in (the lock is re-entrant and the loading flag stops recursion).
    """
    with _LOCK:
        if _state["loading"] or (_state["loaded"] and not again):
            return
        _state["loading"] = True
        try:
            for group in (*PROVIDER_GROUPS, *HARNESS_GROUPS):
                _run_group(group)
        finally:
            _state["loading"] = False
            _state["loaded"] = True
