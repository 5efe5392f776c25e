"""The harness profile API under the reference's module path
(`deepagents.profiles.harness.harness_profiles`): the same objects as `fathom.profiles`."""

from fathom.profiles.harness import (
    GeneralPurposeSubagentProfile,
    HarnessProfile,
    HarnessProfileConfig,
)
from fathom.profiles.registry import get_harness_profile, register_harness_profile

__all__ = [
    "GeneralPurposeSubagentProfile",
    "HarnessProfile",
    "HarnessProfileConfig",
    "get_harness_profile",
    "register_harness_profile",
]
