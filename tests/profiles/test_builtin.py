"""The profiles fathom ships resolve under the reference's keys and change what they say."""

from __future__ import annotations

import pytest
from langchain.agents.middleware import ToolRetryMiddleware

from fathom import create_deep_agent
from fathom.profiles import (
    HarnessProfile,
    get_harness_profile,
    get_provider_profile,
    register_harness_profile,
)
from fathom.profiles.builtin import (
    CLAUDE_HAIKU_4_5,
    CLAUDE_OPUS_4_7,
    CLAUDE_SONNET_4_6,
    CODEX_SPECS,
    NEMOTRON_3_ULTRA_SPECS,
)
from fathom.testing import ScriptedModel, ai

USER = {"messages": [{"role": "user", "content": "hi"}]}
CLAUDE = (CLAUDE_OPUS_4_7, CLAUDE_SONNET_4_6, CLAUDE_HAIKU_4_5)


def _request(model_name: str):
    """The first request of an agent whose model reports `model_name` (a `provider:model`)."""
    model = ScriptedModel(model_name=model_name, replies=[ai("ok")])
    create_deep_agent(model, system_prompt="USER").invoke(USER)
    return model.requests[0]


def test_the_reference_keys_are_registered() -> None:
    assert CLAUDE == ("anthropic:claude-opus-4-7", "anthropic:claude-sonnet-4-6",
                      "anthropic:claude-haiku-4-5")
    assert CODEX_SPECS == ("openai:gpt-5.1-codex", "openai:gpt-5.2-codex",
                           "openai:gpt-5.3-codex")
    assert "nvidia:nvidia/nemotron-3-ultra-550b-a55b" in NEMOTRON_3_ULTRA_SPECS
    assert "NVIDIA:nvidia/nemotron-3-ultra-550b-a55b" in NEMOTRON_3_ULTRA_SPECS
    for key in (*CLAUDE, *CODEX_SPECS, *NEMOTRON_3_ULTRA_SPECS):
        profile = get_harness_profile(key)
        assert profile is not None and profile.system_prompt_suffix, key
    for key in ("nvidia:any", "openrouter:any"):
        assert get_provider_profile(key) is not None, key
    # scoped to those models: the rest of each provider is untouched
    for other in ("anthropic:claude-3-5-haiku", "openai:gpt-5.2", "nvidia:other-model"):
        assert get_harness_profile(other) is None, other


@pytest.mark.parametrize("key", CLAUDE)
def test_claude_profiles_suffix_follows_the_base_prompt(key: str) -> None:
    prompt = _request(key).system_prompt or ""
    assert prompt.startswith("USER\n\n")
    assert "<parallel_tool_calls>" in prompt and "<read_before_answering>" in prompt
    # the subagent advice is for Opus 4.7 alone
    assert ("<use_subagents>" in prompt) == (key == CLAUDE_OPUS_4_7)


@pytest.mark.parametrize("key", CODEX_SPECS)
def test_codex_profile_adds_its_working_style_and_keeps_one_todo_tool(key: str) -> None:
    request = _request(key)
    assert "Never finish with an item still pending." in (request.system_prompt or "")
    assert request.tool_names.count("write_todos") == 1


def test_nemotron_profile_rewrites_read_file_and_retries_file_tools() -> None:
    request = _request("nvidia:nvidia/nemotron-3-ultra-550b-a55b")
    assert "<loop_control>" in (request.system_prompt or "")
    described = {t["function"]["name"]: t["function"]["description"] for t in request.tools}
    assert described["read_file"].startswith("Read a file")
    assert "offset + limit" in described["read_file"]
    profile = get_harness_profile("nvidia:nvidia/nemotron-3-ultra-550b-a55b")
    assert profile is not None
    first, second = profile.materialize_extra_middleware(), profile.materialize_extra_middleware()
    assert first[0] is not second[0]  # a fresh instance per agent
    retry = first[0]
    assert isinstance(retry, ToolRetryMiddleware)
    assert retry.max_retries == 1 and retry.on_failure == "continue"
    assert set(retry._tool_filter or ()) >= {"read_file", "write_file", "edit_file", "grep"}


def test_a_user_registration_layers_on_a_builtin() -> None:
    register_harness_profile(CLAUDE_SONNET_4_6,
                             HarnessProfile(excluded_tools=frozenset({"execute"})))
    profile = get_harness_profile(CLAUDE_SONNET_4_6)
    assert profile is not None
    assert profile.excluded_tools == {"execute"}
    assert "<parallel_tool_calls>" in (profile.system_prompt_suffix or "")


def test_nvidia_requests_name_their_origin_in_a_fresh_mapping() -> None:
    profile = get_provider_profile("nvidia:meta/llama-3.3-70b-instruct")
    assert profile is not None
    first = profile.kwargs("nvidia:meta/llama-3.3-70b-instruct")
    assert first == {"default_headers": {"X-BILLING-INVOKE-ORIGIN": "fathom"}}
    first["default_headers"]["X"] = "changed"
    assert "X" not in profile.kwargs("nvidia:meta/llama-3.3-70b-instruct")["default_headers"]


def test_openrouter_attribution_defers_to_the_environment(monkeypatch) -> None:
    for name in ("OPENROUTER_APP_URL", "OPENROUTER_APP_TITLE", "FATHOM_OPENROUTER_ALLOW_AZURE"):
        monkeypatch.delenv(name, raising=False)
    profile = get_provider_profile("openrouter:anthropic/claude-sonnet-4.6")
    assert profile is not None
    kwargs = profile.kwargs("openrouter:x")
    assert kwargs["app_title"] == "fathom" and kwargs["app_url"]
    assert kwargs["openrouter_provider"] == {"ignore": ["azure"]}

    monkeypatch.setenv("OPENROUTER_APP_TITLE", "")  # set, even empty: the user's choice
    monkeypatch.setenv("OPENROUTER_APP_URL", "https://example.org")
    monkeypatch.setenv("FATHOM_OPENROUTER_ALLOW_AZURE", "yes")
    kwargs = profile.kwargs("openrouter:x")
    assert "app_title" not in kwargs and "app_url" not in kwargs
    assert "openrouter_provider" not in kwargs
    assert profile.kwargs("openrouter:x", {"app_title": "mine"})["app_title"] == "mine"


def test_openrouter_refuses_a_too_old_client_package(tmp_path, monkeypatch) -> None:
    dist = tmp_path / "langchain_openrouter-0.1.5.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: langchain-openrouter\nVersion: 0.1.5\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    profile = get_provider_profile("openrouter:x")
    assert profile is not None
    with pytest.raises(ImportError, match=r"langchain-openrouter>=0\.2\.0.*0\.1\.5"):
        profile.kwargs("openrouter:x")
