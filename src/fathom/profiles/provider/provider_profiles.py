"""The provider profile API under the reference's module path
(`deepagents.profiles.provider.provider_profiles`): the same objects as `fathom.profiles`."""

from fathom.profiles.provider import ProviderProfile
from fathom.profiles.registry import get_provider_profile, register_provider_profile

__all__ = ["ProviderProfile", "get_provider_profile", "register_provider_profile"]
