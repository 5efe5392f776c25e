"""The profile registries, the lookup of a model's profile, and profile plugins.

Registering under a key that already has a profile merges the new one on top. A lookup for
`provider:model` merges the model-level profile on the provider-level one.

Plugins: installed packages register profiles through entry points. Each entry point in
`PROVIDER_GROUPS` / `HARNESS_GROUPS` names a callable taking no arguments that calls
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

Owns: the registries and plugin loading. Imports only `fathom.profiles` modules.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from importlib.metadata import EntryPoint, entry_points
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel

from fathom.profiles.convert import to_harness_profile, to_provider_profile
from fathom.profiles.harness import (
    GeneralPurposeSubagentProfile,
    HarnessProfile,
    HarnessProfileConfig,
    merge_profiles,
)
from fathom.profiles.keys import candidate_keys, validate_key
from fathom.profiles.provider import ProviderProfile, merge_provider_profiles
from fathom.tool_answers import Failure, attempt

__all__ = [
    "HARNESS_GROUPS",
    "PROVIDER_GROUPS",
    "general_purpose_settings",
    "get_harness_profile",
    "get_provider_profile",
    "harness_profile_for_model",
    "load_plugins",
    "provider_init_kwargs",
    "register_harness_profile",
    "register_provider_profile",
]

logger = logging.getLogger(__name__)

_HARNESS: dict[str, HarnessProfile] = {}
_PROVIDER: dict[str, ProviderProfile] = {}
_P = TypeVar("_P", HarnessProfile, ProviderProfile)


def _ensure_plugins() -> None:
    load_plugins()


def register_harness_profile(
    key: str, profile: HarnessProfile | HarnessProfileConfig | Mapping[str, Any]
) -> None:
    """Register `profile` for every model of a provider (`"openai"`) or one model
    (`"openai:gpt-5"`); a second registration under the same key merges on the first.

    `profile` may also be a mapping in `HarnessProfileConfig`'s shape, or the reference
    package's own profile object (read field by field).

    Raises:
        ValueError: a malformed key (empty, or with whitespace around it or the colon).
        TypeError: `profile` is none of those.
    """
    validate_key(key)
    _put(_HARNESS, key, to_harness_profile(profile), merge_profiles)


def register_provider_profile(key: str, profile: ProviderProfile | Mapping[str, Any]) -> None:
    """Register `profile` for a provider or one model; a second registration merges.

    `profile` may also be a mapping of `ProviderProfile`'s fields, or the reference
    package's own `ProviderProfile`.

    Raises:
        ValueError: a malformed key.
        TypeError: `profile` is none of those.
    """
    validate_key(key)
    _put(_PROVIDER, key, to_provider_profile(profile), merge_provider_profiles)


def _put(
    registry: dict[str, _P], key: str, profile: _P, merge: Callable[[_P, _P], _P]
) -> None:
    """Put `profile` in `registry` under `key`, merged on the one already there."""
    with _LOCK:
        _ensure_plugins()
        existing = registry.get(key)
        registry[key] = profile if existing is None else merge(existing, profile)


def get_harness_profile(spec: str) -> HarnessProfile | None:
    """The profile for a `provider:model` spec (model-level merged on provider-level)."""
    return _lookup(_HARNESS, spec, merge_profiles)


def get_provider_profile(spec: str) -> ProviderProfile | None:
    """The provider profile for a spec (model-level merged on provider-level)."""
    return _lookup(_PROVIDER, spec, merge_provider_profiles)


def _lookup(registry: dict[str, _P], spec: str, merge: Callable[[_P, _P], _P]) -> _P | None:
    """`spec`'s profile in `registry`: the model-level one merged on the provider-level one."""
    exact, provider = candidate_keys(spec)
    if exact is None:
        return None
    with _LOCK:
        _ensure_plugins()
        model_level = registry.get(exact)
        provider_level = registry.get(provider) if provider else None
    if model_level is not None and provider_level is not None:
        return merge(provider_level, model_level)
    return model_level or provider_level


def model_spec(model: BaseChatModel) -> tuple[str | None, str | None]:
    """`(provider, model name)` a built chat model reports (LangSmith's `ls_*` params)."""
    # a provider's own code: its failure only loses the profile lookup
    read = attempt(lambda: dict(model._get_ls_params()), "reading the model's provider")
    params: dict[str, Any] = {} if isinstance(read, Failure) else read
    provider = params.get("ls_provider")
    name = params.get("ls_model_name") or getattr(model, "model_name", None) or getattr(
        model, "model", None)
    return (provider if isinstance(provider, str) and provider else None,
            name if isinstance(name, str) and name else None)


def harness_profile_for_model(model: BaseChatModel, spec: str | None = None) -> HarnessProfile:
    """The profile that applies to `model` (an empty one when none is registered).

    `spec` is the string the model was built from, when there was one. Otherwise the
    model's reported provider and name are used: `provider:name` first, then `name` when
    it is itself `provider:model`, then the provider alone.
    """
    if spec:
        return get_harness_profile(spec) or HarnessProfile()
    provider, name = model_spec(model)
    candidates = []
    if provider and name:
        candidates.append(f"{provider}:{name}")
    if name and ":" in name:
        candidates.append(name)
    with _LOCK:
        _ensure_plugins()
        for candidate in candidates:
            if candidate in _HARNESS:
                return get_harness_profile(candidate) or HarnessProfile()
    if provider:
        return get_harness_profile(provider) or HarnessProfile()
    logger.debug("no harness profile for %s", type(model).__name__)
    return HarnessProfile()


def general_purpose_settings(model: BaseChatModel) -> GeneralPurposeSubagentProfile:
    """What the profile of the main agent's `model` says about the general-purpose subagent."""
    return harness_profile_for_model(model).general_purpose_subagent or (
        GeneralPurposeSubagentProfile()
    )


def provider_init_kwargs(spec: str, kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
    """Keyword arguments to build the chat model `spec` with: its provider profile's, then
    `kwargs` (which win). Runs the profile's `pre_init` hook."""
    profile = get_provider_profile(spec)
    return profile.kwargs(spec, kwargs) if profile is not None else dict(kwargs or {})


# --------------------------------------------------------------------------- plugins

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
    for key, profile in provider.items():
        register_provider_profile(key, profile)
    for key, profile in harness.items():
        register_harness_profile(key, profile)


def _register_builtins() -> None:
    """fathom's shipped profiles; a failure here is a fathom bug and is raised."""
    if _state["builtins"]:
        return
    from fathom.profiles.builtin import builtin_harness_profiles, builtin_provider_profiles
    for key, provider in builtin_provider_profiles():
        register_provider_profile(key, provider)
    for key, harness in builtin_harness_profiles():
        register_harness_profile(key, harness)
    _state["builtins"] = True


# What listing entry points raises over a broken installed distribution: an unreadable
# file, undecodable text, or an `entry_points.txt` line without `=` (a TypeError).
_BROKEN_METADATA = (OSError, ValueError, TypeError)


def _run_group(group: str) -> None:
    try:
        found = list(entry_points(group=group))
    except _BROKEN_METADATA as exc:
        logger.warning("could not list %s entry points: %s", group, exc)
        return
    reference = (_reference_registries()
                 if found and group.startswith(_REFERENCE_PREFIX) else None)
    for ep in found:
        where = f"{group} plugin {ep.name!r} ({ep.value})"
        # a plugin's own code: when it fails, it is skipped, not fatal
        failed = attempt(lambda ep=ep: _register(ep, reference), where)
        if isinstance(failed, Failure):
            message = f"Skipped {where}: {failed.text}"
            logger.error(message, exc_info=failed.error)
            warnings.warn(message, stacklevel=3)


def _register(
    ep: EntryPoint, reference: tuple[dict[str, Any], dict[str, Any]] | None
) -> None:
    """Load the plugin `ep` and adopt the profiles it registers."""
    register: Callable[[], object] = ep.load()
    if not callable(register):
        raise TypeError("the entry point is not a callable")
    with _captured(reference) as (harness, provider):
        register()
    _adopt(harness, provider)


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
