"""Profiles behave as the reference package's do: its plugins load, unmatched exclusions
raise, the general-purpose subagent's own prompt wins over the profile's base prompt."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from tests.system_requirements import needs

from fathom import create_deep_agent
from fathom.profiles import (
    GeneralPurposeSubagentProfile,
    HarnessProfile,
    get_harness_profile,
    get_provider_profile,
    register_harness_profile,
)
from fathom.profiles.registry import load_plugins
from fathom.prompt import BASE_PROMPT
from fathom.testing import ScriptedModel, ai, tool_call

USER = {"messages": [{"role": "user", "content": "hi"}]}


def install_plugin(root: Path, name: str, source: str, entry_points: str) -> None:
    """A real installed distribution: a module and a dist-info with entry points."""
    (root / f"{name}.py").write_text(source)
    dist = root / f"{name}-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(entry_points)


MAPPING_PLUGIN = '''
from fathom.profiles import register_harness_profile, register_provider_profile

def register():
    register_harness_profile("mapco", {"system_prompt_suffix": "FROM A MAPPING",
                                       "excluded_tools": ["execute"]})
    register_provider_profile("mapco", {"init_kwargs": {"temperature": 0.1}})
'''


def test_reference_group_plugin_registering_plain_mappings(tmp_path, monkeypatch) -> None:
    install_plugin(tmp_path, "mapco_plugin", MAPPING_PLUGIN,
                   "[deepagents.harness_profiles]\nmapco = mapco_plugin:register\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    load_plugins(again=True)
    harness = get_harness_profile("mapco:m")
    assert harness is not None
    assert harness.system_prompt_suffix == "FROM A MAPPING"
    assert harness.excluded_tools == {"execute"}
    provider = get_provider_profile("mapco:m")
    assert provider is not None and dict(provider.init_kwargs) == {"temperature": 0.1}


def test_mapping_with_unknown_key_is_refused() -> None:
    with pytest.raises(TypeError, match="base_prompt"):
        register_harness_profile("acme", {"base_prompt": "typo"})  # type: ignore[arg-type]


REFERENCE_PLUGIN = '''
from deepagents import (
    GeneralPurposeSubagentProfile, HarnessProfile, ProviderProfile,
    register_harness_profile, register_provider_profile,
)

def register():
    register_provider_profile("refco", ProviderProfile(init_kwargs={"temperature": 0.3}))
    register_harness_profile("refco:big", HarnessProfile(
        system_prompt_suffix="FROM THE REFERENCE",
        tool_description_overrides={"ls": "REF LS"},
        general_purpose_subagent=GeneralPurposeSubagentProfile(enabled=False),
    ))
'''


@pytest.mark.skipif(importlib.util.find_spec("deepagents") is None,
                    reason=needs("deepagents in this environment"))
def test_plugin_calling_the_reference_register_functions_lands_in_fathom(
    tmp_path, monkeypatch
) -> None:
    install_plugin(tmp_path, "refco_plugin", REFERENCE_PLUGIN,
                   "[deepagents.harness_profiles]\nrefco = refco_plugin:register\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    from deepagents.profiles.harness.harness_profiles import _HARNESS_PROFILES

    load_plugins(again=True)
    harness = get_harness_profile("refco:big")
    assert isinstance(harness, HarnessProfile)
    assert harness.system_prompt_suffix == "FROM THE REFERENCE"
    assert dict(harness.tool_description_overrides) == {"ls": "REF LS"}
    assert harness.general_purpose_subagent == GeneralPurposeSubagentProfile(enabled=False)
    provider = get_provider_profile("refco:big")
    assert provider is not None and dict(provider.init_kwargs) == {"temperature": 0.3}
    # the reference's own registry holds the plugin's profile once (from its own bootstrap,
    # if that ran after the plugin was installed), never a second merged copy from fathom
    assert "refco:big" not in _HARNESS_PROFILES or (
        _HARNESS_PROFILES["refco:big"].system_prompt_suffix == "FROM THE REFERENCE")
    sys.modules.pop("refco_plugin", None)


# ------------------------------------------------------------------ unmatched exclusions


def test_excluding_middleware_the_agent_lacks_raises_naming_it() -> None:
    register_harness_profile("scriptedmodel", HarnessProfile(
        excluded_middleware=frozenset({"NoSuchMiddleware"})))
    with pytest.raises(ValueError, match=r"'NoSuchMiddleware' match no middleware") as info:
        create_deep_agent(ScriptedModel(replies=[ai("ok")]))
    assert "PlanningMiddleware" in str(info.value) or "TodoListMiddleware" in str(info.value)


def test_excluding_present_middleware_builds() -> None:
    register_harness_profile("scriptedmodel", HarnessProfile(
        excluded_middleware=frozenset({"SummarizationMiddleware"})))
    model = ScriptedModel(replies=[ai("ok")])
    create_deep_agent(model).invoke(USER)  # no error: it matched


def test_excluding_a_tool_the_agent_lacks_is_allowed_as_in_the_reference() -> None:
    register_harness_profile("scriptedmodel", HarnessProfile(
        excluded_tools=frozenset({"no_such_tool"})))
    model = ScriptedModel(replies=[ai("ok")])
    create_deep_agent(model).invoke(USER)
    assert "ls" in model.requests[0].tool_names


def test_a_call_to_an_excluded_tool_is_refused_not_run() -> None:
    register_harness_profile("scriptedmodel", HarnessProfile(excluded_tools=frozenset({"ls"})))
    model = ScriptedModel(replies=[ai("", tool_call("ls", {"path": "/"})), ai("done")])
    out = create_deep_agent(model).invoke(USER)
    answer = next(m for m in out["messages"] if getattr(m, "name", None) == "ls")
    assert answer.status == "error" and "not available" in answer.content


# ------------------------------------------------------------------ general-purpose prompt


def _gp_run(profile: HarnessProfile) -> str:
    register_harness_profile("scriptedmodel:main", profile)
    main = ScriptedModel(model_name="main", replies=[
        ai("", tool_call("task", {"description": "go", "subagent_type": "general-purpose"})),
        ai("gp done"),
        ai("done"),
    ])
    create_deep_agent(main, system_prompt="MAIN USER").invoke(USER)
    return main.requests[1].system_prompt or ""


def test_general_purpose_prompt_from_profile_wins_over_profile_base_suffix_follows() -> None:
    prompt = _gp_run(HarnessProfile(
        base_system_prompt="PROFILE BASE", system_prompt_suffix="PROFILE SUFFIX",
        general_purpose_subagent=GeneralPurposeSubagentProfile(system_prompt="GP PROMPT")))
    assert prompt.startswith(f"GP PROMPT\n\n{BASE_PROMPT}\n\n")
    assert prompt.endswith("\n\nPROFILE SUFFIX")  # the suffix is last in a subagent too
    assert "PROFILE BASE" not in prompt and "MAIN USER" not in prompt


def test_general_purpose_default_prompt_takes_the_profile_base_and_suffix() -> None:
    from fathom.middleware.subagents import GENERAL_PURPOSE_PROMPT

    prompt = _gp_run(HarnessProfile(base_system_prompt="PROFILE BASE",
                                    system_prompt_suffix="PROFILE SUFFIX"))
    assert prompt.startswith(f"{GENERAL_PURPOSE_PROMPT}\n\nPROFILE BASE\n\n")
    assert prompt.endswith("\n\nPROFILE SUFFIX")
    assert "MAIN USER" not in prompt


def test_task_description_override_lists_the_subagents_in_its_placeholder() -> None:
    register_harness_profile("scriptedmodel", HarnessProfile(
        tool_description_overrides={"task": "DELEGATE. Helpers:\n{available_agents}"}))
    model = ScriptedModel(replies=[ai("ok")])
    create_deep_agent(model, subagents=[
        {"name": "helper", "description": "helps with X", "system_prompt": "p"}]).invoke(USER)
    task = next(t for t in model.requests[0].tools if t["function"]["name"] == "task")
    description = task["function"]["description"]
    assert description.startswith("DELEGATE. Helpers:\n")
    assert "- helper: helps with X" in description and "{available_agents}" not in description
