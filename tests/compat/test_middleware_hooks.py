"""Middleware hooks called directly, with the signatures LangChain passes, as reference code does.

Reference code (and the reference's own tests) call `before_agent(state, runtime, config)` on
`MemoryMiddleware` and `SkillsMiddleware`, `modify_request(request)` to see what the model
would get, build subagents with `create_sub_agent` and `GENERAL_PURPOSE_SUBAGENT`, and import
the middleware names from `deepagents.middleware`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain.agents.middleware.types import ModelRequest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from fathom.backends import FilesystemBackend
from fathom.middleware import (
    AsyncSubAgentMiddleware,
    CompiledSubAgent,
    FilesystemPermission,
    MemoryMiddleware,
    SkillMetadata,
    SkillsMiddleware,
    SkillsState,
    SubAgent,
    SubAgentMiddleware,
)
from fathom.middleware.memory import MEMORY_SYSTEM_PROMPT
from fathom.middleware.patch_tool_calls import PatchToolCallsMiddleware
from fathom.middleware.subagents import GENERAL_PURPOSE_SUBAGENT, create_sub_agent
from fathom.profiles.harness.harness_profiles import HarnessProfile, register_harness_profile
from fathom.profiles.provider.provider_profiles import ProviderProfile, register_provider_profile
from fathom.testing import ScriptedModel, ai

SKILL = "---\nname: web-search\ndescription: Search the web for facts.\n---\n\n# Web search\n"


def _disk(tmp_path: Path, files: dict[str, str]) -> FilesystemBackend:
    for name, text in files.items():
        path = tmp_path / name.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return FilesystemBackend(root_dir=str(tmp_path), virtual_mode=True)


def _request(state: dict[str, Any], system: str | None = "base") -> ModelRequest:
    return ModelRequest(
        model=ScriptedModel(replies=[ai("ok")]),
        messages=[HumanMessage(content="hi")],
        system_message=SystemMessage(content=system) if system is not None else None,
        state={"messages": [], **state},  # type: ignore[typeddict-unknown-key]
    )


def _system_text(request: ModelRequest) -> str:
    assert request.system_message is not None
    return request.system_message.text


# --------------------------------------------------------------------------- imports


def test_the_reference_names_import_from_the_middleware_package() -> None:
    assert FilesystemPermission(operations=["read"], paths=["/x/**"]).mode == "allow"
    assert "name" in SubAgent.__annotations__
    assert "runnable" in CompiledSubAgent.__annotations__
    assert "name" in SkillMetadata.__annotations__
    assert "skills_metadata" in SkillsState.__annotations__
    assert GENERAL_PURPOSE_SUBAGENT["name"] == "general-purpose"
    assert {"description", "system_prompt"} <= set(GENERAL_PURPOSE_SUBAGENT)
    assert callable(register_harness_profile) and callable(register_provider_profile)
    assert HarnessProfile().base_system_prompt is None
    assert ProviderProfile() is not None


# --------------------------------------------------------------------------- memory


def test_memory_before_agent_takes_the_hook_signature_and_returns_memory_contents(
    tmp_path: Path,
) -> None:
    backend = _disk(tmp_path, {"/AGENTS.md": "Answer in French.\n"})
    middleware = MemoryMiddleware(backend=backend, sources=["/AGENTS.md", "/missing.md"])
    update = middleware.before_agent({}, None, {})  # type: ignore[arg-type]
    assert update is not None
    assert update["memory_contents"] == {"/AGENTS.md": "Answer in French.\n"}


async def test_memory_abefore_agent_takes_the_hook_signature(tmp_path: Path) -> None:
    backend = _disk(tmp_path, {"/AGENTS.md": "Be brief.\n"})
    middleware = MemoryMiddleware(backend=backend, sources=["/AGENTS.md"])
    update = await middleware.abefore_agent({}, None, {})  # type: ignore[arg-type]
    assert update is not None
    assert update["memory_contents"] == {"/AGENTS.md": "Be brief.\n"}


def test_memory_already_in_state_is_not_loaded_again(tmp_path: Path) -> None:
    backend = _disk(tmp_path, {"/AGENTS.md": "on disk"})
    middleware = MemoryMiddleware(backend=backend, sources=["/AGENTS.md"])
    state = {"memory_contents": {"/AGENTS.md": "given"}}
    assert middleware.before_agent(state, None, {}) is None  # type: ignore[arg-type]


def test_memory_modify_request_puts_the_files_in_the_system_message(tmp_path: Path) -> None:
    middleware = MemoryMiddleware(backend=_disk(tmp_path, {}), sources=["/AGENTS.md"])
    request = _request({"memory_contents": {"/AGENTS.md": "Answer in French."}})
    text = _system_text(middleware.modify_request(request))
    assert text.startswith("base")
    assert "<agent_memory>" in text and "</agent_memory>" in text
    assert "/AGENTS.md" in text and "Answer in French." in text


def test_memory_modify_request_without_memory_says_none_was_loaded(tmp_path: Path) -> None:
    middleware = MemoryMiddleware(backend=_disk(tmp_path, {}), sources=["/AGENTS.md"])
    text = _system_text(middleware.modify_request(_request({"memory_contents": {}})))
    assert "(No memory loaded)" in text


def test_memory_html_comments_are_left_out_of_the_prompt(tmp_path: Path) -> None:
    middleware = MemoryMiddleware(
        backend=_disk(tmp_path, {}), sources=["/AGENTS.md"], system_prompt="{agent_memory}"
    )
    contents = {"/AGENTS.md": "<!-- marker -->\nKeep answers short.\n"}
    text = _system_text(middleware.modify_request(_request({"memory_contents": contents})))
    assert "<!--" not in text and "Keep answers short." in text


def test_memory_custom_template_and_none(tmp_path: Path) -> None:
    backend = _disk(tmp_path, {})
    custom = MemoryMiddleware(
        backend=backend, sources=["/AGENTS.md"], system_prompt="START {agent_memory} END"
    )
    contents = {"memory_contents": {"/AGENTS.md": "Likes tea."}}
    text = _system_text(custom.modify_request(_request(contents)))
    assert "START" in text and "END" in text and "Likes tea." in text
    silent = MemoryMiddleware(backend=backend, sources=["/AGENTS.md"], system_prompt=None)
    request = _request(contents)
    assert silent.modify_request(request) is request


def test_memory_template_checks() -> None:
    assert "{agent_memory}" in MEMORY_SYSTEM_PROMPT
    with pytest.raises(TypeError, match="must be str or None"):
        MemoryMiddleware(backend=None, sources=[], system_prompt=0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="agent_memory"):
        MemoryMiddleware(backend=None, sources=[], system_prompt="no slot")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- skills


def test_skills_before_agent_takes_the_hook_signature(tmp_path: Path) -> None:
    backend = _disk(tmp_path, {"/skills/web-search/SKILL.md": SKILL})
    middleware = SkillsMiddleware(backend=backend, sources=["/skills/"])
    update = middleware.before_agent({}, None, {})  # type: ignore[arg-type]
    assert update is not None
    (skill,) = update["skills_metadata"]
    assert skill["name"] == "web-search"
    assert skill["description"] == "Search the web for facts."
    assert skill["path"] == "/skills/web-search/SKILL.md"


async def test_skills_abefore_agent_and_an_empty_source(tmp_path: Path) -> None:
    (tmp_path / "skills").mkdir()
    middleware = SkillsMiddleware(backend=_disk(tmp_path, {}), sources=["/skills/"])
    update = await middleware.abefore_agent({}, None, {})  # type: ignore[arg-type]
    assert update is not None
    assert update["skills_metadata"] == []


def test_skills_already_in_state_are_not_loaded_again(tmp_path: Path) -> None:
    backend = _disk(tmp_path, {"/skills/web-search/SKILL.md": SKILL})
    middleware = SkillsMiddleware(backend=backend, sources=["/skills/"])
    assert middleware.before_agent({"skills_metadata": []}, None, {}) is None  # type: ignore[arg-type]


def test_skills_modify_request_lists_the_skills(tmp_path: Path) -> None:
    backend = _disk(tmp_path, {"/skills/web-search/SKILL.md": SKILL})
    middleware = SkillsMiddleware(backend=backend, sources=["/skills/"])
    update = middleware.before_agent({}, None, {})  # type: ignore[arg-type]
    assert update is not None
    text = _system_text(middleware.modify_request(_request(dict(update))))
    assert "web-search" in text and "/skills/web-search/SKILL.md" in text
    silent = SkillsMiddleware(backend=backend, sources=["/skills/"], system_prompt=None)
    request = _request(dict(update))
    assert silent.modify_request(request) is request


def test_skills_custom_template_is_rendered_even_without_skills(tmp_path: Path) -> None:
    middleware = SkillsMiddleware(
        backend=_disk(tmp_path, {}),
        sources=["/skills/"],
        system_prompt="LOC:{skills_locations}|WARN:{skills_load_warnings}|LIST:{skills_list}",
    )
    text = _system_text(middleware.modify_request(_request({"skills_metadata": []})))
    assert "LOC:" in text and "LIST:" in text


def test_skills_constructor_checks(tmp_path: Path) -> None:
    backend = _disk(tmp_path, {})
    with pytest.raises(TypeError, match=r"expected str or \(str, str\) tuple"):
        SkillsMiddleware(backend=backend, sources=[("/only-one",)])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="must be str or None"):
        SkillsMiddleware(backend=backend, sources=[], system_prompt=0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="missing required format slot"):
        SkillsMiddleware(backend=backend, sources=[], system_prompt="{skills_locations}")
    labelled = SkillsMiddleware(backend=backend, sources=[("/skills/", "Team")])
    assert labelled.sources == ["/skills/"] or list(labelled.sources) == ["/skills/"]


# --------------------------------------------------------------------------- subagents


def test_create_sub_agent_compiles_a_spec() -> None:
    runnable = create_sub_agent(
        {
            "name": "worker",
            "description": "Does work.",
            "system_prompt": "Work on the task.",
            "model": ScriptedModel(replies=[ai("done")]),
            "tools": [],
        }
    )
    result = runnable.invoke({"messages": [HumanMessage(content="go")]})
    assert result["messages"][-1].content == "done"
    with pytest.raises(ValueError, match="must specify 'model'"):
        create_sub_agent({"name": "x", "description": "d", "tools": []})  # type: ignore[typeddict-item]


def test_subagent_middleware_over_the_general_purpose_spec() -> None:
    spec = {**GENERAL_PURPOSE_SUBAGENT, "model": ScriptedModel(replies=[ai("ok")]), "tools": []}
    middleware = SubAgentMiddleware(backend=None, subagents=[spec])  # type: ignore[list-item]
    assert [tool.name for tool in middleware.tools] == ["task"]
    assert middleware.system_prompt is None
    guided = SubAgentMiddleware(
        backend=None, subagents=[spec], system_prompt="Delegate big work."  # type: ignore[list-item]
    )
    assert guided.system_prompt is not None
    assert "general-purpose" in guided.system_prompt
    assert GENERAL_PURPOSE_SUBAGENT["description"] in guided.system_prompt
    with pytest.raises(ValueError, match="At least one subagent"):
        SubAgentMiddleware(backend=None, subagents=[])  # type: ignore[arg-type]


def test_async_subagent_middleware_constructor() -> None:
    spec = {"name": "alpha", "description": "Alpha agent", "graph_id": "alpha"}
    with pytest.raises(ValueError, match="At least one async subagent"):
        AsyncSubAgentMiddleware(async_subagents=[])
    with pytest.raises(ValueError, match="Duplicate async subagent names"):
        AsyncSubAgentMiddleware(async_subagents=[spec, spec])  # type: ignore[list-item]
    assert AsyncSubAgentMiddleware(async_subagents=[spec]).system_prompt is None  # type: ignore[list-item]
    guided = AsyncSubAgentMiddleware(async_subagents=[spec], system_prompt="Use them.")  # type: ignore[list-item]
    assert guided.system_prompt is not None
    assert "alpha" in guided.system_prompt and "Alpha agent" in guided.system_prompt


# --------------------------------------------------------------------------- patching


def test_patch_tool_calls_before_agent_answers_a_dangling_call() -> None:
    call = {"name": "search", "args": {}, "id": "c1", "type": "tool_call"}
    state = {"messages": [HumanMessage(content="hi"), AIMessage(content="", tool_calls=[call])]}
    update = PatchToolCallsMiddleware().before_agent(state, None)  # type: ignore[arg-type]
    assert update is not None
    (answer,) = [m for m in update["messages"] if isinstance(m, ToolMessage)]
    assert answer.tool_call_id == "c1"
    assert answer.content.startswith("Tool call search with id c1 did not complete")
    assert PatchToolCallsMiddleware().before_agent({"messages": []}, None) is None  # type: ignore[arg-type]


def test_memory_over_a_store_namespaced_by_assistant_reads_the_graph_runtime() -> None:
    """A `StoreBackend` namespace factory reading `rt.server_info` (the documented way to give
    each assistant its own memory) works when `before_agent` is handed a partial runtime:
    the attributes it lacks come from the graph's runtime, as the reference reads them."""
    from contextlib import contextmanager
    from types import SimpleNamespace

    from langchain_core.runnables.config import var_child_runnable_config
    from langgraph._internal._constants import CONF, CONFIG_KEY_RUNTIME
    from langgraph.runtime import Runtime, ServerInfo
    from langgraph.store.memory import InMemoryStore

    from fathom.backends import StoreBackend

    def by_assistant(rt: Any) -> tuple[str, ...]:
        assistant = rt.server_info.assistant_id if rt.server_info else None
        return (assistant, "filesystem") if assistant else ("filesystem",)

    @contextmanager
    def served_as(assistant_id: str) -> Any:
        info = ServerInfo(assistant_id=assistant_id, graph_id="agent")
        token = var_child_runnable_config.set({CONF: {CONFIG_KEY_RUNTIME: Runtime(
            server_info=info)}})  # fmt: skip
        try:
            yield
        finally:
            var_child_runnable_config.reset(token)

    store = InMemoryStore()
    stamp = "2024-01-01T00:00:00+00:00"
    store.put(("a-1", "filesystem"), "/memory/AGENTS.md",
              {"content": "# Notes\n- for a-1", "encoding": "utf-8", "created_at": stamp,
               "modified_at": stamp})  # fmt: skip
    middleware = MemoryMiddleware(
        backend=StoreBackend(store=store, namespace=by_assistant), sources=["/memory/AGENTS.md"]
    )
    runtime: Any = SimpleNamespace(context=None, store=store, stream_writer=lambda _: None)
    with served_as("a-1"):
        mine = middleware.before_agent({}, runtime, {})  # type: ignore[arg-type]
    with served_as("a-2"):
        theirs = middleware.before_agent({}, runtime, {})  # type: ignore[arg-type]
    assert mine is not None and "for a-1" in mine["memory_contents"]["/memory/AGENTS.md"]
    assert theirs is not None and theirs["memory_contents"] == {}
