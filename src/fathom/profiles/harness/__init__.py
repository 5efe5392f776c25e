"""Harness profiles: how an agent is shaped for one provider or model after the model exists.

A `HarnessProfile` changes the prompt (`base_system_prompt` replaces fathom's base prompt,
`system_prompt_suffix` follows it), the tools (descriptions rewritten, some hidden), the
middleware (some removed, some added) and the default general-purpose subagent.
`HarnessProfileConfig` is the part of it that fits in a YAML or JSON file.
`fathom.profiles.harness.harness_profiles` is the reference's module path for these names.

Layer: foundation; it must not import capabilities, agent, project, server, protocols or cli.
"""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any

from langchain.agents.middleware.types import AgentMiddleware

__all__ = [
    "SCAFFOLDING_MIDDLEWARE",
    "GeneralPurposeSubagentProfile",
    "HarnessProfile",
    "HarnessProfileConfig",
    "merge_profiles",
    "resolve_class_path",
]

SCAFFOLDING_MIDDLEWARE: frozenset[str] = frozenset({"FilesystemMiddleware", "SubAgentMiddleware"})
"""Middleware a profile may not remove: the file tools (and the permission rules they
enforce) and the `task` tool depend on them."""

MiddlewareSource = Sequence[AgentMiddleware] | Callable[[], Sequence[AgentMiddleware]]


_CLASS_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
"""A `"module:Class"` entry: a dotted module path, a colon, a (dotted) attribute path."""


def _entry_name(entry: object) -> str:
    """The class name an entry names: a class's, a class path's last part, or the name."""
    if isinstance(entry, str):
        return entry.rpartition(":")[2].rpartition(".")[2] if ":" in entry else entry
    return getattr(entry, "__name__", repr(entry))


def resolve_class_path(entry: str) -> type[AgentMiddleware]:
    """The middleware class a `"module:Class"` entry names, imported now.

    Raises:
        ValueError: the module cannot be imported, it has no such attribute, or the
            attribute is not an `AgentMiddleware` class; the message names the entry.
    """
    module_name, _, qualname = entry.partition(":")
    try:
        found: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as error:
        raise ValueError(
            f"excluded_middleware entry {entry!r} names a class that cannot be imported "
            f"({type(error).__name__}: {error}); fix the module path or the class name."
        ) from error
    if not (isinstance(found, type) and issubclass(found, AgentMiddleware)):
        raise ValueError(
            f"excluded_middleware entry {entry!r} names {found!r}, which is not a middleware "
            "class (a subclass of AgentMiddleware)."
        )
    return found


def _check_excluded_middleware(entries: frozenset[Any]) -> None:
    """Raise for malformed `excluded_middleware` entries and for scaffolding ones.

    A `"module:Class"` entry is only checked for its form here; its class is imported when
    the profile is applied to an agent (`HarnessProfile.excludes`), not when it is made.
    """
    for entry in entries:
        if isinstance(entry, type):
            continue
        if not isinstance(entry, str):
            raise TypeError(
                f"excluded_middleware entries are middleware names or classes, not {entry!r}."
            )
        if not entry.strip():
            raise ValueError("excluded_middleware entries must be non-empty names.")
        if ":" in entry:
            if not _CLASS_PATH.fullmatch(entry):
                raise ValueError(
                    f"excluded_middleware entry {entry!r} is neither a middleware name nor a "
                    "class path: write a class path as 'package.module:ClassName'."
                )
            continue  # a class path may name a private class: that is what it is for
        if entry.startswith("_"):
            raise ValueError(
                f"excluded_middleware entry {entry!r} names private middleware, which is not "
                "part of what a profile may remove."
            )
    blocked = sorted({_entry_name(e) for e in entries} & SCAFFOLDING_MIDDLEWARE)
    if blocked:
        raise ValueError(
            f"excluded_middleware cannot remove {', '.join(blocked)}: the file tools, their "
            "permission rules and the `task` tool depend on it. Hide single tools with "
            "excluded_tools instead."
        )


@dataclass(frozen=True)
class GeneralPurposeSubagentProfile:
    """Changes to the `general-purpose` subagent that `create_deep_agent` adds by default.

    `None` fields inherit (from a provider-level profile when merging, else the default).
    `enabled=False` leaves the subagent out; `True` brings it back after a provider-level
    profile turned it off. `system_prompt` wins over the profile's `base_system_prompt` for
    this subagent; the profile's suffix still follows it.
    """

    enabled: bool | None = None
    description: str | None = None
    system_prompt: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The fields that are set, as plain values."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) is not None}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GeneralPurposeSubagentProfile:
        """Build from a mapping; unknown keys or wrong types raise `TypeError`."""
        if not isinstance(data, Mapping):
            raise TypeError(f"general_purpose_subagent must be a mapping, not {data!r}.")
        allowed = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise TypeError(
                f"Unknown general_purpose_subagent keys {unknown}; allowed: {sorted(allowed)}."
            )
        enabled = data.get("enabled")
        if enabled is not None and not isinstance(enabled, bool):
            raise TypeError(f"general_purpose_subagent.enabled must be a bool, not {enabled!r}.")
        return cls(
            enabled=enabled,
            description=_str_or_none(
                data.get("description"), "general_purpose_subagent.description"
            ),
            system_prompt=_str_or_none(
                data.get("system_prompt"), "general_purpose_subagent.system_prompt"
            ),
        )


@dataclass(frozen=True)
class HarnessProfile:
    """How `create_deep_agent` shapes an agent whose model matches the profile's key.

    Attributes:
        base_system_prompt: Replaces fathom's base prompt (the caller's `system_prompt`
            still comes first).
        system_prompt_suffix: Follows the base prompt.
        tool_description_overrides: Tool name -> new description, for built-in and caller
            tools alike.
        excluded_tools: Tool names the model is not shown.
        excluded_middleware: Middleware removed from the stack: by `.name` (or class name),
            by class, or by class path `"package.module:ClassName"` (imported when the
            profile is applied, so use it only in trusted configuration: it runs that
            module's code); the filesystem and subagent middleware cannot be removed.
        extra_middleware: Middleware added to the stack (or a factory returning it, called
            for each agent built, so no instance is shared between agents).
        general_purpose_subagent: Changes to the default subagent.
    """

    base_system_prompt: str | None = None
    system_prompt_suffix: str | None = None
    tool_description_overrides: Mapping[str, str] = field(default_factory=dict)
    excluded_tools: frozenset[str] = frozenset()
    excluded_middleware: frozenset[type[AgentMiddleware] | str] = frozenset()
    extra_middleware: MiddlewareSource = ()
    general_purpose_subagent: GeneralPurposeSubagentProfile | None = None

    def __post_init__(self) -> None:
        _copy_collections(self)
        if not callable(self.extra_middleware):
            object.__setattr__(self, "extra_middleware", tuple(self.extra_middleware))
        _check_excluded_middleware(self.excluded_middleware)

    def materialize_extra_middleware(self) -> list[AgentMiddleware]:
        """A new list of `extra_middleware` (calling the factory when it is one)."""
        source = self.extra_middleware
        return list(source() if callable(source) else source)

    def excludes(self, middleware: AgentMiddleware) -> bool:
        """Whether `middleware` is one that `excluded_middleware` removes.

        A `"module:Class"` entry is imported here, the first time the profile is applied
        (so only a profile in use imports code), and then matches like the class itself;
        one that cannot be imported raises `ValueError` naming it.
        """
        for entry in self.excluded_middleware:
            if isinstance(entry, str) and ":" in entry:
                entry = resolve_class_path(entry)
            if isinstance(entry, str) and entry in (middleware.name, type(middleware).__name__):
                return True
            if isinstance(entry, type) and isinstance(middleware, entry):
                return True
        return False

    def prompt(self, base: str) -> str:
        """`base` replaced by `base_system_prompt` when set, then `system_prompt_suffix`."""
        text = self.base_system_prompt if self.base_system_prompt is not None else base
        if self.system_prompt_suffix:
            text = f"{text}\n\n{self.system_prompt_suffix}" if text else self.system_prompt_suffix
        return text


def _copy_collections(profile: HarnessProfile | HarnessProfileConfig) -> None:
    """Frozen copies of a profile's dict and lists, so a caller's later edit of them cannot
    change a registered profile."""
    overrides = MappingProxyType(dict(profile.tool_description_overrides))
    object.__setattr__(profile, "tool_description_overrides", overrides)
    object.__setattr__(profile, "excluded_tools", frozenset(profile.excluded_tools))
    object.__setattr__(profile, "excluded_middleware", frozenset(profile.excluded_middleware))


def _merge_middleware(base: MiddlewareSource, override: MiddlewareSource) -> MiddlewareSource:
    """`base` with `override` layered on: same class replaces in place, new ones appended."""
    if not override:
        return base
    if not base:
        return override

    def merged() -> list[AgentMiddleware]:
        out = list(base() if callable(base) else base)
        for item in override() if callable(override) else override:
            same = [i for i, m in enumerate(out) if type(m) is type(item)]
            if same:
                out[same[0]] = item
                for i in reversed(same[1:]):
                    del out[i]
            else:
                out.append(item)
        return out

    return merged


def merge_profiles(base: HarnessProfile, override: HarnessProfile) -> HarnessProfile:
    """`override` layered on `base` (a model-level profile on its provider's).

    Scalars: the override's when set. Description overrides: per tool, the override wins.
    Excluded tools and middleware: union. Extra middleware: by class, the override's
    instance replaces the base's in place. General-purpose settings: field by field.
    """
    gp_base, gp_over = base.general_purpose_subagent, override.general_purpose_subagent
    if gp_base is None or gp_over is None:
        gp = gp_over or gp_base
    else:
        gp = GeneralPurposeSubagentProfile(**{**gp_base.to_dict(), **gp_over.to_dict()})
    return HarnessProfile(
        base_system_prompt=(override.base_system_prompt if override.base_system_prompt is not None
                            else base.base_system_prompt),
        system_prompt_suffix=(override.system_prompt_suffix
                              if override.system_prompt_suffix is not None
                              else base.system_prompt_suffix),
        tool_description_overrides={**base.tool_description_overrides,
                                    **override.tool_description_overrides},
        excluded_tools=base.excluded_tools | override.excluded_tools,
        excluded_middleware=base.excluded_middleware | override.excluded_middleware,
        extra_middleware=_merge_middleware(base.extra_middleware, override.extra_middleware),
        general_purpose_subagent=gp,
    )


def _str_or_none(value: object, name: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{name} must be a string, not {value!r}.")
    return value


def _str_set(value: object, name: str) -> frozenset[str]:
    if value is None:
        return frozenset()
    if isinstance(value, str) or not isinstance(value, (list, tuple, set, frozenset)):
        raise TypeError(f"{name} must be a list of strings, not {value!r}.")
    bad = [v for v in value if not isinstance(v, str)]
    if bad:
        raise TypeError(f"{name} must hold only strings; got {bad!r}.")
    return frozenset(value)


@dataclass(frozen=True)
class HarnessProfileConfig:
    """The declarative part of a `HarnessProfile`, loadable from YAML or JSON.

    Middleware instances cannot be written in a file, so there is no `extra_middleware`;
    `excluded_middleware` holds names and class paths (`"package.module:ClassName"`,
    imported when the profile is applied). `from_dict` / `to_dict` round-trip; `from_file`
    reads `.json`, `.yaml` or `.yml`.
    """

    base_system_prompt: str | None = None
    system_prompt_suffix: str | None = None
    tool_description_overrides: Mapping[str, str] = field(default_factory=dict)
    excluded_tools: frozenset[str] = frozenset()
    excluded_middleware: frozenset[str] = frozenset()
    general_purpose_subagent: GeneralPurposeSubagentProfile | None = None

    def __post_init__(self) -> None:
        _copy_collections(self)
        for entry in self.excluded_middleware:
            if not isinstance(entry, str):
                raise TypeError(f"excluded_middleware in a config holds names, not {entry!r}.")
        _check_excluded_middleware(self.excluded_middleware)

    def to_dict(self) -> dict[str, Any]:
        """Plain values for `json.dumps` / `yaml.safe_dump`; unset fields are left out."""
        out: dict[str, Any] = {}
        for key in ("base_system_prompt", "system_prompt_suffix"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.tool_description_overrides:
            out["tool_description_overrides"] = dict(self.tool_description_overrides)
        if self.excluded_tools:
            out["excluded_tools"] = sorted(self.excluded_tools)
        if self.excluded_middleware:
            out["excluded_middleware"] = sorted(self.excluded_middleware)
        if self.general_purpose_subagent is not None:
            out["general_purpose_subagent"] = self.general_purpose_subagent.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HarnessProfileConfig:
        """Build from a mapping; unknown keys and wrong types raise `TypeError`."""
        if not isinstance(data, Mapping):
            raise TypeError(
                f"A harness profile config must be a mapping, not {type(data).__name__}."
            )
        allowed = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise TypeError(f"Unknown harness profile keys {unknown}; allowed: {sorted(allowed)}.")
        overrides = data.get("tool_description_overrides") or {}
        if not isinstance(overrides, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in overrides.items()
        ):
            raise TypeError("tool_description_overrides must map tool names to strings.")
        gp = data.get("general_purpose_subagent")
        return cls(
            base_system_prompt=_str_or_none(data.get("base_system_prompt"), "base_system_prompt"),
            system_prompt_suffix=_str_or_none(
                data.get("system_prompt_suffix"), "system_prompt_suffix"
            ),
            tool_description_overrides=dict(overrides),
            excluded_tools=_str_set(data.get("excluded_tools"), "excluded_tools"),
            excluded_middleware=_str_set(data.get("excluded_middleware"), "excluded_middleware"),
            general_purpose_subagent=(
                None if gp is None else GeneralPurposeSubagentProfile.from_dict(gp)
            ),
        )

    @classmethod
    def from_file(cls, path: str | Path) -> HarnessProfileConfig:
        """Read a `.json`, `.yaml` or `.yml` file (YAML needs PyYAML)."""
        path = Path(path)
        text = path.read_text(encoding="utf-8")
        if path.suffix.lower() in (".yaml", ".yml"):
            import yaml  # PyYAML; only needed for YAML files

            data = yaml.safe_load(text)
        elif path.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            raise ValueError(f"{path}: a profile file ends in .json, .yaml or .yml.")
        return cls.from_dict(data or {})

    def to_harness_profile(self) -> HarnessProfile:
        """The runtime profile with the same settings (every field of the config)."""
        return HarnessProfile(**{f.name: getattr(self, f.name) for f in fields(self)})

    @classmethod
    def from_harness_profile(cls, profile: HarnessProfile) -> HarnessProfileConfig:
        """The declarative form of `profile`; raises `ValueError` for runtime-only parts."""
        if callable(profile.extra_middleware) or profile.extra_middleware:
            raise ValueError(
                "extra_middleware cannot be written to a config; keep this profile as a "
                "HarnessProfile."
            )
        names = []
        for entry in profile.excluded_middleware:
            if isinstance(entry, str):
                names.append(entry)
                continue
            alias = getattr(entry, "serialized_name", None)
            if not isinstance(alias, str) or not alias:
                raise ValueError(
                    f"excluded_middleware class {entry.__name__} has no `serialized_name`; "
                    "exclude it by name to write it to a config."
                )
            names.append(alias)
        shared = {f.name: getattr(profile, f.name) for f in fields(cls)}
        return cls(**{**shared, "excluded_middleware": frozenset(names)})
