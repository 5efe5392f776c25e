"""The profile registries and the lookup of a model's profile.

Registering under a key that already has a profile merges the new one on top. A lookup for
`provider:model` merges the model-level profile on the provider-level one.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from langchain_core.language_models import BaseChatModel

from fathom.profiles.convert import to_harness_profile, to_provider_profile
from fathom.profiles.harness import (
    GeneralPurposeSubagentProfile,
    HarnessProfile,
    HarnessProfileConfig,
    merge_profiles,
)
from fathom.profiles.keys import candidate_keys, validate_key
from fathom.profiles.loading import _LOCK, load_plugins
from fathom.profiles.provider import ProviderProfile, merge_provider_profiles

__all__ = [
    "general_purpose_settings",
    "get_harness_profile",
    "get_provider_profile",
    "harness_profile_for_model",
    "provider_init_kwargs",
    "register_harness_profile",
    "register_provider_profile",
]

logger = logging.getLogger(__name__)

_HARNESS: dict[str, HarnessProfile] = {}
_PROVIDER: dict[str, ProviderProfile] = {}


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
    profile = to_harness_profile(profile)
    with _LOCK:
        _ensure_plugins()
        existing = _HARNESS.get(key)
        _HARNESS[key] = profile if existing is None else merge_profiles(existing, profile)


def register_provider_profile(key: str, profile: ProviderProfile | Mapping[str, Any]) -> None:
    """Register `profile` for a provider or one model; a second registration merges.

    `profile` may also be a mapping of `ProviderProfile`'s fields, or the reference
    package's own `ProviderProfile`.

    Raises:
        ValueError: a malformed key.
        TypeError: `profile` is none of those.
    """
    validate_key(key)
    profile = to_provider_profile(profile)
    with _LOCK:
        _ensure_plugins()
        existing = _PROVIDER.get(key)
        _PROVIDER[key] = profile if existing is None else merge_provider_profiles(existing, profile)


def get_harness_profile(spec: str) -> HarnessProfile | None:
    """The profile for a `provider:model` spec (model-level merged on provider-level)."""
    exact, provider = candidate_keys(spec)
    if exact is None:
        return None
    with _LOCK:
        _ensure_plugins()
        model_level = _HARNESS.get(exact)
        provider_level = _HARNESS.get(provider) if provider else None
    if model_level is not None and provider_level is not None:
        return merge_profiles(provider_level, model_level)
    return model_level or provider_level


def get_provider_profile(spec: str) -> ProviderProfile | None:
    """The provider profile for a spec (model-level merged on provider-level)."""
    exact, provider = candidate_keys(spec)
    if exact is None:
        return None
    with _LOCK:
        _ensure_plugins()
        model_level = _PROVIDER.get(exact)
        provider_level = _PROVIDER.get(provider) if provider else None
    if model_level is not None and provider_level is not None:
        return merge_provider_profiles(provider_level, model_level)
    return model_level or provider_level


def model_spec(model: BaseChatModel) -> tuple[str | None, str | None]:
    """`(provider, model name)` a built chat model reports (LangSmith's `ls_*` params)."""
    params: dict[str, Any] = {}
    try:
        params = dict(model._get_ls_params())
    except Exception:
        logger.debug("could not read the model's provider", exc_info=True)
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
