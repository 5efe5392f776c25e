"""Provider profiles: how a chat model is built from a `provider:model` string.

`fathom.profiles.provider.provider_profiles` is the reference's module path for these names.

Layer: foundation; it must not import capabilities, agent, project, server, protocols or cli.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = ["ProviderProfile", "merge_provider_profiles"]


@dataclass(frozen=True)
class ProviderProfile:
    """Settings for building the chat models a key matches.

    Attributes:
        init_kwargs: Keyword arguments for `init_chat_model` (the caller's own win).
        pre_init: Called with the model spec before the model is built (e.g. to check
            that a credential is set).
        init_kwargs_factory: Called at build time for keyword arguments that depend on
            the environment; they override `init_kwargs`.
    """

    init_kwargs: Mapping[str, Any] = field(default_factory=dict)
    pre_init: Callable[[str], None] | None = None
    init_kwargs_factory: Callable[[], dict[str, Any]] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "init_kwargs", MappingProxyType(dict(self.init_kwargs)))
        for name in ("pre_init", "init_kwargs_factory"):
            value = getattr(self, name)
            if value is not None and not callable(value):
                raise TypeError(f"ProviderProfile.{name} must be callable or None, not {value!r}.")

    def kwargs(self, spec: str, caller: Mapping[str, Any] | None = None,
               *, run_pre_init: bool = True) -> dict[str, Any]:
        """The keyword arguments to build `spec` with: profile ones, then the caller's."""
        if run_pre_init and self.pre_init is not None:
            self.pre_init(spec)
        merged = dict(self.init_kwargs)
        if self.init_kwargs_factory is not None:
            merged.update(self.init_kwargs_factory())
        merged.update(caller or {})
        return merged


def _chain(first: Callable[..., Any] | None, second: Callable[..., Any] | None,
           combine: Callable[[Any, Any], Any]) -> Callable[..., Any] | None:
    if first is None or second is None:
        return second or first

    def chained(*args: Any) -> Any:
        return combine(first(*args), second(*args))

    return chained


def merge_provider_profiles(base: ProviderProfile, override: ProviderProfile) -> ProviderProfile:
    """`override` layered on `base`: kwargs merged (override wins), hooks run base first."""
    return ProviderProfile(
        init_kwargs={**base.init_kwargs, **override.init_kwargs},
        pre_init=_chain(base.pre_init, override.pre_init, lambda _a, _b: None),
        init_kwargs_factory=_chain(base.init_kwargs_factory, override.init_kwargs_factory,
                                   lambda a, b: {**a, **b}),
    )
