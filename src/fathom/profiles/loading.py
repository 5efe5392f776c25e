"""Profile plugins: installed packages register profiles through entry points.

Each entry point in the groups below names a callable taking no arguments that calls
`register_harness_profile` / `register_provider_profile`. fathom's own groups come with
the reference package's, so a plugin written for it is discovered too. Plugins load once,
on the first registry access, after fathom's built-in profiles (so they layer on top); a
broken plugin is logged and skipped, not fatal.

A plugin of the reference's groups usually calls the reference's own `register_*`
functions. When that package is installed, such a plugin runs against an emptied copy of
its registries; what it registered there is converted to fathom's profiles and the
reference's registries are put back as they were. (Another thread using the reference
package's registries during that call would see them empty.) Without the package, such a
plugin can only use fathom's functions.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib.metadata import entry_points
from typing import Any

__all__ = ["HARNESS_GROUPS", "PROVIDER_GROUPS", "load_plugins"]

logger = logging.getLogger(__name__)

PROVIDER_GROUPS = ("fathom.provider_profiles", "deepagents.provider_profiles")
HARNESS_GROUPS = ("fathom.harness_profiles", "deepagents.harness_profiles")

_REFERENCE_PREFIX = "deepagents."

_state = {"loaded": False, "loading": False, "builtins": False}
_LOCK = threading.RLock()
"""Guards both the plugin run and the registries (re-entrant: plugins register while it
is held), so there is one lock order."""


def _reference_registries() -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The reference package's harness and provider registries, bootstrapped, or `None`
    when it is not installed (or its layout is not the one known here)."""
    if importlib.util.find_spec("deepagents") is None:
        return None
    try:
        from deepagents.profiles._builtin_profiles import (  # type: ignore[import-not-found]
            _ensure_builtin_profiles_loaded,
        )
        from deepagents.profiles.harness.harness_profiles import (  # type: ignore[import-not-found]
            _HARNESS_PROFILES,
        )
        from deepagents.profiles.provider.provider_profiles import (  # type: ignore[import-not-found]
            _PROVIDER_PROFILES,
        )
    except ImportError as exc:
        logger.warning("the reference package's profile registries are not readable: %s", exc)
        return None
    # its own bootstrap first, so it does not run inside the capture below
    _ensure_builtin_profiles_loaded()
    return _HARNESS_PROFILES, _PROVIDER_PROFILES


@contextmanager
def _captured(registries: tuple[dict[str, Any], dict[str, Any]] | None
              ) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Empty the reference registries for one plugin call; yield what it put there."""
    harness: dict[str, Any] = {}
    provider: dict[str, Any] = {}
    if registries is None:
        yield harness, provider
        return
    saved = [dict(r) for r in registries]
    for live in registries:
        live.clear()
    try:
        yield harness, provider
    finally:
        harness.update(registries[0])
        provider.update(registries[1])
        for live, before in zip(registries, saved, strict=True):
            live.clear()
            live.update(before)


def _adopt(harness: dict[str, Any], provider: dict[str, Any]) -> None:
    """Register in fathom what a plugin registered with the reference package."""
    from fathom.profiles.registry import register_harness_profile, register_provider_profile

    for key, profile in provider.items():
        register_provider_profile(key, profile)
    for key, profile in harness.items():
        register_harness_profile(key, profile)


def _register_builtins() -> None:
    """fathom's shipped profiles; a failure here is a fathom bug and is raised."""
    if _state["builtins"]:
        return
    from fathom.profiles.builtin import builtin_harness_profiles, builtin_provider_profiles
    from fathom.profiles.registry import register_harness_profile, register_provider_profile

    for key, provider in builtin_provider_profiles():
        register_provider_profile(key, provider)
    for key, harness in builtin_harness_profiles():
        register_harness_profile(key, harness)
    _state["builtins"] = True


def _run_group(group: str) -> None:
    try:
        found = list(entry_points(group=group))
    except Exception as exc:
        logger.warning("could not list %s entry points: %s", group, exc)
        return
    reference = (_reference_registries()
                 if found and group.startswith(_REFERENCE_PREFIX) else None)
    for ep in found:
        where = f"{group} plugin {ep.name!r} ({ep.value})"
        try:
            register: Callable[[], object] = ep.load()
            if not callable(register):
                raise TypeError("the entry point is not a callable")
            with _captured(reference) as (harness, provider):
                register()
            _adopt(harness, provider)
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
            _register_builtins()
            for group in (*PROVIDER_GROUPS, *HARNESS_GROUPS):
                _run_group(group)
        finally:
            _state["loading"] = False
            _state["loaded"] = True
