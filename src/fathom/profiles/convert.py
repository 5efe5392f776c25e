"""Turning foreign profile values into fathom's: plain mappings and the reference package's
own profile objects.

A plugin written for Deep Agents builds `deepagents.HarnessProfile` /
`deepagents.ProviderProfile` objects. Those share their field names with fathom's, so they
are read field by field (no import of `deepagents` is needed). A plain mapping is read as
a `HarnessProfileConfig` (harness) or as `ProviderProfile` keyword arguments (provider).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fathom.profiles.harness import (
    GeneralPurposeSubagentProfile,
    HarnessProfile,
    HarnessProfileConfig,
)
from fathom.profiles.provider import ProviderProfile

__all__ = ["to_harness_profile", "to_provider_profile"]

_HARNESS_FIELDS = ("base_system_prompt", "system_prompt_suffix", "tool_description_overrides",
                   "excluded_tools", "excluded_middleware", "extra_middleware",
                   "general_purpose_subagent")
_PROVIDER_FIELDS = ("init_kwargs", "pre_init", "init_kwargs_factory")
_GENERAL_PURPOSE_FIELDS = ("enabled", "description", "system_prompt")


def _has_fields(value: object, names: tuple[str, ...]) -> bool:
    return all(hasattr(value, name) for name in names)


def _general_purpose(value: object) -> GeneralPurposeSubagentProfile | None:
    if value is None or isinstance(value, GeneralPurposeSubagentProfile):
        return value
    if isinstance(value, Mapping):
        return GeneralPurposeSubagentProfile.from_dict(value)
    if _has_fields(value, _GENERAL_PURPOSE_FIELDS):
        return GeneralPurposeSubagentProfile(
            **{name: getattr(value, name) for name in _GENERAL_PURPOSE_FIELDS}
        )
    raise TypeError(f"general_purpose_subagent must be a GeneralPurposeSubagentProfile, "
                    f"not {value!r}.")


def to_harness_profile(profile: object) -> HarnessProfile:
    """`profile` as a fathom `HarnessProfile`.

    Accepts a `HarnessProfile`, a `HarnessProfileConfig`, a mapping in the config's shape,
    or an object with the harness profile fields (the reference package's own
    `HarnessProfile` or `HarnessProfileConfig`).

    Raises:
        TypeError: anything else, or a mapping with unknown keys or wrong types.
    """
    if isinstance(profile, HarnessProfile):
        return profile
    if isinstance(profile, HarnessProfileConfig):
        return profile.to_harness_profile()
    if isinstance(profile, Mapping):
        return HarnessProfileConfig.from_dict(profile).to_harness_profile()
    if _has_fields(profile, _HARNESS_FIELDS[:5]) and hasattr(profile, "general_purpose_subagent"):
        ref: Any = profile
        return HarnessProfile(
            base_system_prompt=ref.base_system_prompt,
            system_prompt_suffix=ref.system_prompt_suffix,
            tool_description_overrides=dict(ref.tool_description_overrides),
            excluded_tools=frozenset(ref.excluded_tools),
            excluded_middleware=frozenset(ref.excluded_middleware),
            # a config object has no extra_middleware; a factory stays a factory
            extra_middleware=getattr(profile, "extra_middleware", ()) or (),
            general_purpose_subagent=_general_purpose(
                ref.general_purpose_subagent),
        )
    raise TypeError(
        "register_harness_profile takes a HarnessProfile, a HarnessProfileConfig or a "
        f"mapping of its fields, not {type(profile).__name__}."
    )


def to_provider_profile(profile: object) -> ProviderProfile:
    """`profile` as a fathom `ProviderProfile`: one already, a mapping of its fields, or an
    object with them (the reference package's `ProviderProfile`).

    Raises:
        TypeError: anything else, or a mapping with keys a `ProviderProfile` lacks.
    """
    if isinstance(profile, ProviderProfile):
        return profile
    if isinstance(profile, Mapping):
        unknown = sorted(set(profile) - set(_PROVIDER_FIELDS))
        if unknown:
            raise TypeError(f"Unknown provider profile keys {unknown}; allowed: "
                            f"{sorted(_PROVIDER_FIELDS)}.")
        data: dict[str, Any] = dict(profile)
        return ProviderProfile(**data)
    if _has_fields(profile, _PROVIDER_FIELDS):
        ref: Any = profile
        return ProviderProfile(
            init_kwargs=dict(ref.init_kwargs or {}),
            pre_init=ref.pre_init,
            init_kwargs_factory=ref.init_kwargs_factory,
        )
    raise TypeError(
        "register_provider_profile takes a ProviderProfile or a mapping of its fields, "
        f"not {type(profile).__name__}."
    )
