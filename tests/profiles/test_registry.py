"""Profile data, key grammar, registration merges and lookup."""

from __future__ import annotations

import json

import pytest

from fathom.profiles import (
    GeneralPurposeSubagentProfile,
    HarnessProfile,
    HarnessProfileConfig,
    ProviderProfile,
    get_harness_profile,
    get_provider_profile,
    register_harness_profile,
    register_provider_profile,
)


@pytest.mark.parametrize(
    "key", ["", " acme", "acme ", "acme :m", "acme: m", ":m", "acme:", "acme:m\n"]
)
def test_malformed_keys_are_refused(key: str) -> None:
    with pytest.raises(ValueError, match="rofile key"):
        register_harness_profile(key, HarnessProfile())
    with pytest.raises(ValueError, match="rofile key"):
        register_provider_profile(key, ProviderProfile())


def test_model_part_may_hold_colons() -> None:
    register_harness_profile("acme:glm-5.2:cloud", HarnessProfile(system_prompt_suffix="S"))
    profile = get_harness_profile("acme:glm-5.2:cloud")
    assert profile is not None and profile.system_prompt_suffix == "S"


def test_model_level_merges_on_provider_level() -> None:
    register_harness_profile("acme", HarnessProfile(
        system_prompt_suffix="provider suffix",
        tool_description_overrides={"ls": "P-ls", "task": "P-task"},
        excluded_tools=frozenset({"execute"}),
        general_purpose_subagent=GeneralPurposeSubagentProfile(enabled=False, description="D"),
    ))
    register_harness_profile("acme:big", HarnessProfile(
        base_system_prompt="model base",
        tool_description_overrides={"task": "M-task"},
        excluded_tools=frozenset({"grep"}),
        general_purpose_subagent=GeneralPurposeSubagentProfile(enabled=True),
    ))
    merged = get_harness_profile("acme:big")
    assert merged is not None
    assert merged.base_system_prompt == "model base"
    assert merged.system_prompt_suffix == "provider suffix"
    assert dict(merged.tool_description_overrides) == {"ls": "P-ls", "task": "M-task"}
    assert merged.excluded_tools == {"execute", "grep"}
    assert merged.general_purpose_subagent == GeneralPurposeSubagentProfile(
        enabled=True, description="D"
    )
    # another model of the provider gets the provider's profile alone
    other = get_harness_profile("acme:small")
    assert other is not None and other.base_system_prompt is None
    assert get_harness_profile("elsewhere:big") is None


def test_registering_twice_under_one_key_merges() -> None:
    register_harness_profile("acme", HarnessProfile(excluded_tools=frozenset({"a"})))
    register_harness_profile("acme", HarnessProfile(excluded_tools=frozenset({"b"}),
                                                    system_prompt_suffix="x"))
    profile = get_harness_profile("acme")
    assert profile is not None
    assert profile.excluded_tools == {"a", "b"} and profile.system_prompt_suffix == "x"


@pytest.mark.parametrize("name", ["FilesystemMiddleware", "SubAgentMiddleware"])
def test_scaffolding_middleware_cannot_be_excluded(name: str) -> None:
    with pytest.raises(ValueError, match=f"cannot remove {name}"):
        HarnessProfile(excluded_middleware=frozenset({name}))
    with pytest.raises(ValueError, match=f"cannot remove {name}"):
        HarnessProfileConfig.from_dict({"excluded_middleware": [name]})
    from fathom.middleware.filesystem import FilesystemMiddleware
    from fathom.middleware.subagents import SubAgentMiddleware

    cls = {"FilesystemMiddleware": FilesystemMiddleware,
           "SubAgentMiddleware": SubAgentMiddleware}[name]
    with pytest.raises(ValueError, match="cannot remove"):
        HarnessProfile(excluded_middleware=frozenset({cls}))


@pytest.mark.parametrize("entry", ["", "  ", "pkg.mod:", "pkg mod:Class", "_Private"])
def test_bad_middleware_names_are_refused(entry: str) -> None:
    with pytest.raises(ValueError):
        HarnessProfile(excluded_middleware=frozenset({entry}))


def test_profile_is_frozen_against_later_edits() -> None:
    overrides = {"ls": "one"}
    profile = HarnessProfile(tool_description_overrides=overrides)
    overrides["ls"] = "two"
    assert profile.tool_description_overrides["ls"] == "one"
    with pytest.raises(TypeError):
        profile.tool_description_overrides["ls"] = "three"  # type: ignore[index]


def test_config_round_trips_through_json_and_yaml(tmp_path) -> None:
    data = {
        "base_system_prompt": "B",
        "system_prompt_suffix": "S",
        "tool_description_overrides": {"ls": "List."},
        "excluded_tools": ["execute"],
        "excluded_middleware": ["SummarizationMiddleware"],
        "general_purpose_subagent": {"enabled": False},
    }
    (tmp_path / "p.json").write_text(json.dumps(data))
    (tmp_path / "p.yaml").write_text(
        "base_system_prompt: B\nsystem_prompt_suffix: S\n"
        "tool_description_overrides:\n  ls: List.\nexcluded_tools: [execute]\n"
        "excluded_middleware: [SummarizationMiddleware]\n"
        "general_purpose_subagent:\n  enabled: false\n"
    )
    from_json = HarnessProfileConfig.from_file(tmp_path / "p.json")
    from_yaml = HarnessProfileConfig.from_file(tmp_path / "p.yaml")
    assert from_json == from_yaml
    assert from_json.to_dict() == data
    runtime = from_json.to_harness_profile()
    assert HarnessProfileConfig.from_harness_profile(runtime) == from_json
    register_harness_profile("acme", from_yaml)
    registered = get_harness_profile("acme:any")
    assert registered is not None and registered.excluded_tools == {"execute"}


def test_config_refuses_unknown_keys_and_wrong_types() -> None:
    with pytest.raises(TypeError, match="base_prompt"):
        HarnessProfileConfig.from_dict({"base_prompt": "typo"})
    with pytest.raises(TypeError, match="excluded_tools"):
        HarnessProfileConfig.from_dict({"excluded_tools": "execute"})
    with pytest.raises(TypeError, match="enable"):
        HarnessProfileConfig.from_dict({"general_purpose_subagent": {"enable": False}})
    with pytest.raises(ValueError, match="extra_middleware"):
        HarnessProfileConfig.from_harness_profile(HarnessProfile(extra_middleware=lambda: []))


def test_provider_profiles_merge_and_caller_kwargs_win() -> None:
    seen: list[str] = []
    register_provider_profile("acme", ProviderProfile(
        init_kwargs={"temperature": 0, "timeout": 5}, pre_init=seen.append,
        init_kwargs_factory=lambda: {"base_url": "http://p"},
    ))
    register_provider_profile("acme:big", ProviderProfile(
        init_kwargs={"timeout": 9}, pre_init=lambda s: seen.append("model " + s),
        init_kwargs_factory=lambda: {"api_key": "k"},
    ))
    profile = get_provider_profile("acme:big")
    assert profile is not None
    kwargs = profile.kwargs("acme:big", {"temperature": 1})
    assert kwargs == {"temperature": 1, "timeout": 9, "base_url": "http://p", "api_key": "k"}
    assert seen == ["acme:big", "model acme:big"]
