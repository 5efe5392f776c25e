"""`excluded_middleware` entries written as class paths, `"package.module:ClassName"`.

The Deep Agents documentation describes this form for middleware whose class is not part of
a public import surface; it is imported when the profile is applied, not when it is made.
"""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
from langchain.agents.middleware import AgentMiddleware

from fathom import create_deep_agent
from fathom.profiles import HarnessProfile, HarnessProfileConfig, register_harness_profile
from fathom.testing import ScriptedModel, ai

USER = {"messages": [{"role": "user", "content": "hi"}]}


class _Telemetry(AgentMiddleware):
    """A private middleware: excluded by class path, it leaves the prompt unmarked."""

    def wrap_model_call(self, request, handler):
        prompt = (request.system_prompt or "") + "\nTELEMETRY"
        return handler(request.override(system_prompt=prompt))


def _run(key: str, profile: HarnessProfile | HarnessProfileConfig, **options) -> ScriptedModel:
    register_harness_profile(f"scriptedmodel:{key}", profile)
    model = ScriptedModel(model_name=key, replies=[ai("ok")])
    create_deep_agent(model, **options).invoke(USER)
    return model


def test_a_class_path_removes_the_middleware_of_that_class() -> None:
    model = _run("planning", HarnessProfile(excluded_middleware=frozenset(
        {"fathom.middleware.planning:PlanningMiddleware"})))
    assert "write_todos" not in model.requests[0].tool_names
    assert "read_file" in model.requests[0].tool_names


def test_a_class_path_reaches_a_private_class_a_name_entry_may_not() -> None:
    with pytest.raises(ValueError, match="private"):
        HarnessProfile(excluded_middleware=frozenset({"_Telemetry"}))
    kept = _run("kept", HarnessProfile(), middleware=[_Telemetry()])
    assert "TELEMETRY" in (kept.requests[0].system_prompt or "")
    config = HarnessProfileConfig.from_dict(
        {"excluded_middleware": [f"{__name__}:_Telemetry"]})
    dropped = _run("dropped", config, middleware=[_Telemetry()])
    assert "TELEMETRY" not in (dropped.requests[0].system_prompt or "")
    assert config.to_dict() == {"excluded_middleware": [f"{__name__}:_Telemetry"]}


def test_the_class_is_imported_when_the_profile_is_applied(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "lazy_mw_gaps.py").write_text(textwrap.dedent("""
        from langchain.agents.middleware import AgentMiddleware

        class Noisy(AgentMiddleware):
            pass
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "lazy_mw_gaps", raising=False)
    profile = HarnessProfile(excluded_middleware=frozenset({"lazy_mw_gaps:Noisy"}))
    register_harness_profile("scriptedmodel:lazy", profile)
    assert "lazy_mw_gaps" not in sys.modules  # making and registering imports nothing
    model = ScriptedModel(model_name="lazy", replies=[ai("ok")])
    try:
        with pytest.raises(ValueError, match="match no middleware"):  # imported, then matched
            create_deep_agent(model)
        assert "lazy_mw_gaps" in sys.modules
    finally:
        sys.modules.pop("lazy_mw_gaps", None)


@pytest.mark.parametrize(
    ("entry", "error"),
    [
        ("no_such_package_gaps.mod:Thing", "cannot be imported .*No module named"),
        ("fathom.middleware.planning:NoSuchClass", "cannot be imported .*AttributeError"),
        ("fathom.prompt:BASE_PROMPT", "not a middleware class"),
    ],
)
def test_a_class_path_that_names_no_middleware_class_fails_at_build(entry: str, error: str):
    profile = HarnessProfile(excluded_middleware=frozenset({entry}))  # the form is fine
    register_harness_profile("scriptedmodel:broken", profile)
    with pytest.raises(ValueError, match=f"{entry!r} .*{error}"):
        create_deep_agent(ScriptedModel(model_name="broken", replies=[ai("ok")]))


@pytest.mark.parametrize(
    ("entry", "error"),
    [
        ("a:b:c", "neither a middleware name nor a class path"),
        ("pkg.mod:", "neither a middleware name nor a class path"),
        ("fathom.middleware.filesystem:FilesystemMiddleware", "cannot remove FilesystemMiddleware"),
        ("fathom.middleware.subagents:SubAgentMiddleware", "cannot remove SubAgentMiddleware"),
    ],
)
def test_a_malformed_or_scaffolding_class_path_fails_when_the_profile_is_made(entry, error):
    with pytest.raises(ValueError, match=error):
        HarnessProfile(excluded_middleware=frozenset({entry}))
    with pytest.raises(ValueError, match=error):
        HarnessProfileConfig.from_dict({"excluded_middleware": [entry]})
