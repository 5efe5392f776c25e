"""A registered harness profile shapes the agents whose model it matches."""

from __future__ import annotations

from langchain.agents.middleware import AgentMiddleware
from langchain_core.tools import tool

from fathom import create_deep_agent
from fathom.profiles import HarnessProfile, register_harness_profile
from fathom.prompt import BASE_PROMPT
from fathom.testing import ScriptedModel, ai, tool_call

USER = {"messages": [{"role": "user", "content": "hi"}]}


@tool
def lookup(query: str) -> str:
    """Look a thing up."""
    return query


def _descriptions(request) -> dict[str, str]:
    return {t["function"]["name"]: t["function"]["description"] for t in request.tools}


def test_prompt_is_user_then_profile_base_then_suffix() -> None:
    register_harness_profile("scriptedmodel", HarnessProfile(
        base_system_prompt="PROFILE BASE", system_prompt_suffix="PROFILE SUFFIX"))
    model = ScriptedModel(replies=[ai("ok")])
    create_deep_agent(model, system_prompt="USER PART").invoke(USER)
    prompt = model.requests[0].system_prompt or ""
    assert prompt.startswith("USER PART\n\nPROFILE BASE\n\n")
    # the suffix comes last, after the sections the middleware add (planning, files, ...)
    assert prompt.endswith("\n\nPROFILE SUFFIX") and "## Files" in prompt
    assert BASE_PROMPT not in prompt


def test_suffix_alone_follows_fathoms_base_prompt() -> None:
    register_harness_profile("scriptedmodel:scripted",
                             HarnessProfile(system_prompt_suffix="SUFFIX"))
    model = ScriptedModel(replies=[ai("ok")])
    create_deep_agent(model, system_prompt="USER").invoke(USER)
    prompt = model.requests[0].system_prompt or ""
    assert prompt.startswith(f"USER\n\n{BASE_PROMPT}\n\n") and prompt.endswith("\n\nSUFFIX")


def test_tool_descriptions_change_for_builtin_and_user_tools_and_exclusions_hide() -> None:
    register_harness_profile("scriptedmodel", HarnessProfile(
        tool_description_overrides={"ls": "LS BY PROFILE", "lookup": "LOOKUP BY PROFILE",
                                    "task": "TASK BY PROFILE"},
        excluded_tools=frozenset({"grep"}),
    ))
    model = ScriptedModel(replies=[ai("", tool_call("lookup", {"query": "q"})), ai("done")])
    out = create_deep_agent(model, tools=[lookup]).invoke(USER)
    descriptions = _descriptions(model.requests[0])
    assert descriptions["ls"] == "LS BY PROFILE"
    assert descriptions["lookup"] == "LOOKUP BY PROFILE"
    assert descriptions["task"] == "TASK BY PROFILE"
    assert "grep" not in descriptions and "read_file" in descriptions
    # the tool still runs under its new description
    assert any(getattr(m, "name", None) == "lookup" and m.content == "q" for m in out["messages"])


class _Marker(AgentMiddleware):
    """Adds a line to the prompt, so a test can see it ran."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def wrap_model_call(self, request, handler):
        return handler(request.override(system_prompt=(request.system_prompt or "") + self.text))


def test_excluded_middleware_leaves_and_extra_middleware_joins() -> None:
    register_harness_profile("scriptedmodel", HarnessProfile(
        excluded_middleware=frozenset({"PlanningMiddleware"}),
        extra_middleware=lambda: [_Marker("\n\nMARKER")],
    ))
    model = ScriptedModel(replies=[ai("ok")])
    create_deep_agent(model).invoke(USER)
    request = model.requests[0]
    assert "write_todos" not in request.tool_names
    assert "read_file" in request.tool_names  # the scaffolding stays
    assert "MARKER" in (request.system_prompt or "")


def test_each_subagent_gets_the_profile_of_its_own_model() -> None:
    register_harness_profile("scriptedmodel:main", HarnessProfile(system_prompt_suffix="MAIN-P"))
    register_harness_profile("scriptedmodel:helper",
                             HarnessProfile(system_prompt_suffix="HELPER-P",
                                            excluded_tools=frozenset({"ls"})))
    helper = ScriptedModel(model_name="helper", replies=[ai("helped")])
    main = ScriptedModel(model_name="main", replies=[
        ai("", tool_call("task", {"description": "do it", "subagent_type": "helper"})),
        ai("done"),
    ])
    agent = create_deep_agent(main, subagents=[
        {"name": "helper", "description": "helps", "system_prompt": "HELPER SPEC",
         "model": helper},
    ])
    agent.invoke(USER)
    main_prompt = main.requests[0].system_prompt or ""
    helper_prompt = helper.requests[0].system_prompt or ""
    assert "MAIN-P" in main_prompt and "HELPER-P" not in main_prompt
    assert helper_prompt.startswith("HELPER SPEC\n\n")
    assert "HELPER-P" in helper_prompt and "MAIN-P" not in helper_prompt
    assert "ls" in main.requests[0].tool_names and "ls" not in helper.requests[0].tool_names


def test_general_purpose_subagent_follows_the_main_models_profile() -> None:
    from fathom.profiles import GeneralPurposeSubagentProfile

    register_harness_profile("scriptedmodel:main", HarnessProfile(
        general_purpose_subagent=GeneralPurposeSubagentProfile(
            description="GP BY PROFILE", system_prompt="GP PROMPT")))
    main = ScriptedModel(model_name="main", replies=[
        ai("", tool_call("task", {"description": "go", "subagent_type": "general-purpose"})),
        ai("gp done"),
        ai("done"),
    ])
    create_deep_agent(main, system_prompt="MAIN USER").invoke(USER)
    assert "GP BY PROFILE" in _descriptions(main.requests[0])["task"]
    assert (main.requests[1].system_prompt or "").startswith("GP PROMPT\n\n")

    register_harness_profile("scriptedmodel:off", HarnessProfile(
        general_purpose_subagent=GeneralPurposeSubagentProfile(enabled=False)))
    off = ScriptedModel(model_name="off", replies=[ai("ok")])
    create_deep_agent(off).invoke(USER)
    assert "task" not in off.requests[0].tool_names


def test_provider_profile_shapes_a_model_built_from_a_spec(monkeypatch) -> None:
    from fathom.models import resolve_model
    from fathom.profiles import ProviderProfile, register_provider_profile

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    seen: list[str] = []
    register_provider_profile("openai", ProviderProfile(
        init_kwargs={"temperature": 0.25}, pre_init=seen.append))
    model = resolve_model("openai:gpt-4.1")
    assert getattr(model, "temperature", None) == 0.25
    assert seen == ["openai:gpt-4.1"]


# ------------------------------------------------------------------ sections of hidden tools


def test_a_profile_that_hides_execute_drops_the_shell_section(tmp_path) -> None:
    from fathom.backends import LocalShellBackend

    backend = LocalShellBackend(root_dir=tmp_path, virtual_mode=True)
    plain = ScriptedModel(model_name="plain", replies=[ai("ok")])
    create_deep_agent(plain, backend=backend).invoke(USER)
    assert "## Shell" in (plain.requests[0].system_prompt or "")  # (without the profile)
    assert "execute" in plain.requests[0].tool_names

    register_harness_profile("scriptedmodel:noshell", HarnessProfile(
        excluded_tools=frozenset({"execute", "write_todos"})))
    model = ScriptedModel(model_name="noshell", replies=[ai("ok")])
    create_deep_agent(model, backend=backend).invoke(USER)
    request = model.requests[0]
    prompt = request.system_prompt or ""
    assert "execute" not in request.tool_names and "write_todos" not in request.tool_names
    assert "## Shell" not in prompt and "`execute`" not in prompt
    assert "## Planning" not in prompt  # the same for any section about a hidden tool
    assert "## Files" in prompt  # a section whose tools are offered stays


# ------------------------------------------------------------------ the suffix comes last


class _VolatileNote(AgentMiddleware):
    """Adds a volatile section (one that may change between calls), rendered late."""

    def wrap_model_call(self, request, handler):
        from fathom.prompt import PromptSection, add_prompt_section

        return handler(add_prompt_section(request, PromptSection("note", "NOTE", "volatile")))


def test_the_profile_suffix_is_the_last_thing_in_the_prompt(tmp_path) -> None:
    from fathom.backends import LocalShellBackend

    register_harness_profile("scriptedmodel:main", HarnessProfile(
        base_system_prompt="PROFILE BASE", system_prompt_suffix="PROFILE SUFFIX"))
    register_harness_profile("scriptedmodel:helper",
                             HarnessProfile(system_prompt_suffix="HELPER SUFFIX"))
    helper = ScriptedModel(model_name="helper", replies=[ai("helped")])
    main = ScriptedModel(model_name="main", replies=[
        ai("", tool_call("task", {"description": "do it", "subagent_type": "helper"})),
        ai("done"),
    ])
    (tmp_path / "skills" / "greet").mkdir(parents=True)
    (tmp_path / "skills" / "greet" / "SKILL.md").write_text(
        "---\nname: greet\ndescription: Greets people.\n---\nSay hello.")
    (tmp_path / "AGENTS.md").write_text("MEMORY TEXT")
    create_deep_agent(
        main,
        system_prompt="USER PART",
        backend=LocalShellBackend(root_dir=tmp_path, virtual_mode=True),
        memory=["/AGENTS.md"],
        skills=["/skills/"],
        middleware=[_VolatileNote()],
        subagents=[{"name": "helper", "description": "helps", "system_prompt": "HELPER SPEC",
                    "model": helper}],
    ).invoke(USER)
    prompt = main.requests[0].system_prompt or ""
    marks = ["USER PART", "PROFILE BASE", "## Planning", "MEMORY TEXT", "greet", "## Files",
             "## Shell", "NOTE", "PROFILE SUFFIX"]
    assert all(mark in prompt for mark in marks), [m for m in marks if m not in prompt]
    assert [prompt.index(m) for m in marks] == sorted(prompt.index(m) for m in marks)
    assert prompt.endswith("\n\nPROFILE SUFFIX")  # after the volatile section too
    helper_prompt = helper.requests[0].system_prompt or ""
    assert helper_prompt.startswith("HELPER SPEC") and helper_prompt.endswith("\n\nHELPER SUFFIX")
