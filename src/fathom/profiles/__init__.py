"""Harness and provider profiles: per-provider and per-model shaping of an agent.

A `HarnessProfile` registered under `"provider"` or `"provider:model"` changes the prompt,
the tools and the middleware of every agent (main agent or subagent) whose model matches;
a `ProviderProfile` changes how a model is built from its spec string. Installed packages
can register both through entry points (see `fathom.profiles.registry`).

Layer: foundation; it must not import capabilities, agent, project, server, protocols or cli.
"""

from fathom.profiles.harness import (
    GeneralPurposeSubagentProfile,
    HarnessProfile,
    HarnessProfileConfig,
)
from fathom.profiles.provider import ProviderProfile
from fathom.profiles.registry import (
    get_harness_profile,
    get_provider_profile,
    harness_profile_for_model,
    register_harness_profile,
    register_provider_profile,
)

__all__ = [
    "GeneralPurposeSubagentProfile",
    "HarnessProfile",
    "HarnessProfileConfig",
    "ProviderProfile",
    "get_harness_profile",
    "get_provider_profile",
    "harness_profile_for_model",
    "register_harness_profile",
    "register_provider_profile",
]
