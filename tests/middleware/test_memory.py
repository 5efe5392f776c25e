"""MemoryMiddleware: AGENTS.md-style files loaded into a stable prompt section every run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from langchain.agents.middleware.types import AgentMiddleware
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.runtime import Runtime
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from fathom import FilesystemPermission, create_deep_agent, create_file_data
from fathom.backends import CompositeBackend, FilesystemBackend, StateBackend, StoreBackend
from fathom.backends.versions import file_version
from fathom.middleware.memory import (
    MEMORY_GUIDANCE,
    NOT_CREATED_NOTE,
    MemoryMiddleware,
    render_memory,
)
from fathom.prompt import PromptSection, sections_of
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

GUIDANCE_HEAD = "## Memory"
PREFS = "## Preferences\n- Likes concise bullet points\n"


def user(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def thread(name: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": name}}


def memory_block(path: str, body: str) -> str:
    return f'<memory_file path="{path}">\n{body}\n</memory_file>'


def edit(path: str, old: str, new: str) -> Any:
    return tool_call("edit_file", {"file_path": path, "old_string": old, "new_string": new})


def editing_model(path: str, old: str, new: str) -> ScriptedModel:
    """Edits memory when told "Remember", otherwise just answers."""

    def policy(request: ScriptRequest) -> Any:
        if request.tool_results:
            return ai("Noted.")
        if request.last_human_text.startswith("Remember"):
            return ai("", edit(path, old, new))
        return ai("Hello.")

    return ScriptedModel(policy=policy)


class SectionRecorder(AgentMiddleware):
    """Records the prompt sections each model call is given (sits inside the memory one)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[list[PromptSection]] = []

    def wrap_model_call(self, request: Any, handler: Any) -> Any:
        self.seen.append(sections_of(request.system_message))
        return handler(request)

    async def awrap_model_call(self, request: Any, handler: Any) -> Any:
        self.seen.append(sections_of(request.system_message))
        return await handler(request)


# --------------------------------------------------------------------------- the prompt


def test_memory_is_a_stable_section_of_the_first_request():
    model = ScriptedModel(replies=[ai("hi")])
    recorder = SectionRecorder()
    agent = create_deep_agent(
        model,
        system_prompt="You are a helpful assistant.",
        middleware=[MemoryMiddleware(sources=["/AGENTS.md"]), recorder],
        interrupt_on={"write_file": True},
        checkpointer=InMemorySaver(),
    )
    agent.invoke(
        {**user("hello"), "files": {"/AGENTS.md": create_file_data("Answer in French.\n")}},
        thread("t"),
    )

    prompt = model.requests[0].system_prompt
    assert memory_block("/AGENTS.md", "Answer in French.") in prompt
    (memory,) = [s for s in recorder.seen[0] if s.name == "memory"]
    assert memory.stability == "stable"
    assert memory.text.startswith(MEMORY_GUIDANCE)
    # Rendered with the stable sections: after the caller's prompt and the base prompt,
    # before the conditional approval section.
    names = [s.name for s in recorder.seen[0]]
    assert names.index("custom") < names.index("base") < names.index("memory")
    assert prompt.index("You are a helpful assistant.") < prompt.index(GUIDANCE_HEAD)
    assert prompt.index(GUIDANCE_HEAD) < prompt.index("## Approval")


def test_memory_parameter_puts_the_section_after_planning_and_before_files():
    # Tutorial §6.3.5: custom prompt, base prompt, todo list, memory, ..., filesystem.
    model = ScriptedModel(replies=[ai("hi")])
    agent = create_deep_agent(model, system_prompt="Be kind.", memory=["/AGENTS.md"])
    agent.invoke({**user("hello"), "files": {"/AGENTS.md": create_file_data("Be brief.")}})
    prompt = model.requests[0].system_prompt
    positions = [prompt.index(s) for s in ("Be kind.", "## Planning", GUIDANCE_HEAD, "## Files")]
    assert positions == sorted(positions)
    assert memory_block("/AGENTS.md", "Be brief.") in prompt


def test_sources_are_combined_in_order_each_under_its_path():
    model = ScriptedModel(replies=[ai("hi")])
    agent = create_deep_agent(
        model,
        middleware=[MemoryMiddleware(sources=["/user/AGENTS.md", "/project/AGENTS.md"])],
    )
    files = {
        "/project/AGENTS.md": create_file_data("Project: use pytest.\n"),
        "/user/AGENTS.md": create_file_data("User: likes short answers.\n"),
    }
    agent.invoke({**user("hello"), "files": files})
    prompt = model.requests[0].system_prompt
    user_block = memory_block("/user/AGENTS.md", "User: likes short answers.")
    project_block = memory_block("/project/AGENTS.md", "Project: use pytest.")
    assert prompt.index(user_block) < prompt.index(project_block)


def test_the_section_is_the_same_for_every_call_of_a_run():
    model = ScriptedModel(replies=[ai("", edit("/AGENTS.md", "tabs", "spaces")), ai("done")])
    agent = create_deep_agent(model, middleware=[MemoryMiddleware(sources=["/AGENTS.md"])])
    state = agent.invoke(
        {**user("Remember: spaces"), "files": {"/AGENTS.md": create_file_data("Use tabs.")}}
    )
    first, second = model.requests
    # The edit happened, but the prompt of the run's later calls keeps the run's memory.
    assert state["files"]["/AGENTS.md"]["content"] == "Use spaces."
    assert first.system_prompt == second.system_prompt
    assert "Use tabs." in second.system_prompt


def test_private_state_key_is_not_in_the_output():
    agent = create_deep_agent(
        ScriptedModel(replies=[ai("hi")]),
        middleware=[MemoryMiddleware(sources=["/AGENTS.md"])],
    )
    result = agent.invoke(user("hello"))
    assert "memory_contents" not in result
    assert "memory_notes" not in result


def test_no_sources_shows_that_no_memory_was_loaded():
    # as in the reference: the section is there, with its "no memory" marker
    model = ScriptedModel(replies=[ai("hi")])
    agent = create_deep_agent(model, middleware=[MemoryMiddleware(sources=[])])
    agent.invoke(user("hello"))
    assert "<agent_memory>\n(No memory loaded)\n</agent_memory>" in model.requests[0].system_prompt


def test_system_prompt_none_adds_no_section():
    model = ScriptedModel(replies=[ai("hi")])
    agent = create_deep_agent(
        model, middleware=[MemoryMiddleware(sources=["/AGENTS.md"], system_prompt=None)]
    )
    agent.invoke({**user("hello"), "files": {"/AGENTS.md": create_file_data("Be brief.")}})
    assert GUIDANCE_HEAD not in model.requests[0].system_prompt


# --------------------------------------------------------------------------- loading


def test_a_missing_file_does_not_crash_and_is_named_as_not_created():
    model = ScriptedModel(replies=[ai("hi")])
    agent = create_deep_agent(model, middleware=[MemoryMiddleware(sources=["/memories/AGENTS.md"])])
    result = agent.invoke(user("hello"))
    assert result["messages"][-1].content == "hi"
    assert memory_block("/memories/AGENTS.md", NOT_CREATED_NOTE) in model.requests[0].system_prompt


def test_binary_oversized_empty_and_unreadable_files_get_notes():
    files = {
        "/bin.md": create_file_data(b"\x00\x01\x02binary"),
        "/big.md": create_file_data("x" * 200),
        "/empty.md": create_file_data(""),
        "/ok.md": create_file_data("small"),
        "/dir/inner.md": create_file_data("inside"),
    }
    middleware = MemoryMiddleware(
        sources=["/bin.md", "/big.md", "/empty.md", "/ok.md", "/dir"], max_file_bytes=100
    )
    model = ScriptedModel(replies=[ai("hi")])
    create_deep_agent(model, middleware=[middleware]).invoke({**user("hello"), "files": files})
    prompt = model.requests[0].system_prompt
    assert memory_block("/bin.md", "(not loaded: it is a binary file, not text)") in prompt
    assert "(not loaded: 200 bytes is over the 100-byte limit for memory files;" in prompt
    assert memory_block("/empty.md", "(empty)") in prompt
    assert memory_block("/ok.md", "small") in prompt
    assert "<memory_file path=\"/dir\">\n(not loaded: '/dir' is a directory." in prompt
    assert "x" * 200 not in prompt


def test_state_key_is_written_only_when_memory_changed():
    middleware = MemoryMiddleware(sources=["/AGENTS.md"])
    state = {"messages": [], "files": {"/AGENTS.md": create_file_data("v1")}}
    update = middleware.before_agent(state, Runtime())
    assert update == {
        "memory_contents": {"/AGENTS.md": "v1"},
        "memory_notes": {},
        "memory_versions": {"/AGENTS.md": file_version(create_file_data("v1"))},
    }
    assert middleware.before_agent({**state, **update}, Runtime()) is None
    changed = {**state, **update, "files": {"/AGENTS.md": create_file_data("v2")}}
    assert middleware.before_agent(changed, Runtime()) == {
        "memory_contents": {"/AGENTS.md": "v2"},
        "memory_versions": {"/AGENTS.md": file_version(create_file_data("v2"))},
    }


def test_memory_the_caller_put_in_state_is_used_as_it_is():
    # the reference skips loading when `memory_contents` is already there
    middleware = MemoryMiddleware(sources=["/AGENTS.md"])
    state = {"messages": [], "memory_contents": {"/AGENTS.md": "given"},
             "files": {"/AGENTS.md": create_file_data("on disk")}}
    assert middleware.before_agent(state, Runtime(), {}) is None


def test_unchanged_memory_writes_nothing_on_later_runs():
    agent = create_deep_agent(
        ScriptedModel(policy=lambda request: ai("hi")),
        middleware=[MemoryMiddleware(sources=["/AGENTS.md"])],
        checkpointer=InMemorySaver(),
    )
    config = thread("quiet")
    start = {**user("one"), "files": {"/AGENTS.md": create_file_data("Be brief.")}}

    def memory_updates(payload: dict[str, Any]) -> list[Any]:
        return [
            update
            for chunk in agent.stream(payload, config, stream_mode="updates")
            for node, update in chunk.items()
            if node == "MemoryMiddleware.before_agent"
        ]

    assert memory_updates(start) == [
        {
            "memory_contents": {"/AGENTS.md": "Be brief."},
            "memory_notes": {},
            "memory_versions": {"/AGENTS.md": file_version(create_file_data("Be brief."))},
        }
    ]
    assert memory_updates(user("two")) == [None]


def test_source_paths_are_normalised_and_relative_ones_stay_relative():
    middleware = MemoryMiddleware(
        sources=["./AGENTS.md", "/memories//a/../AGENTS.md", "/memories/AGENTS.md", "docs/M.md"]
    )
    assert middleware.sources == ("AGENTS.md", "/memories/AGENTS.md", "docs/M.md")
    # On a backend rooted at "/", a relative source is read from the root.
    model = ScriptedModel(replies=[ai("hi")])
    create_deep_agent(model, middleware=[middleware]).invoke(
        {**user("hello"), "files": {"/AGENTS.md": create_file_data("root memory")}}
    )
    assert memory_block("AGENTS.md", "root memory") in model.requests[0].system_prompt


@pytest.mark.parametrize(
    ("sources", "error"),
    [
        ("/AGENTS.md", TypeError),
        ([42], TypeError),
        (["~/.deepagents/preferences.md"], ValueError),
        (["/../AGENTS.md"], ValueError),
        (["/"], ValueError),
        ([""], ValueError),
    ],
)
def test_unusable_sources_are_refused_when_the_middleware_is_made(sources, error):
    with pytest.raises(error):
        MemoryMiddleware(sources=sources)


def test_render_memory_names_a_source_that_was_not_loaded():
    text = render_memory(["/a.md"], {}, guidance="")
    assert text == memory_block("/a.md", "(not loaded in this run)")


# --------------------------------------------------------------------------- updating


def test_an_edit_in_run_1_is_in_the_system_prompt_of_run_2():
    model = editing_model("/AGENTS.md", "Use tabs.", "Use spaces.")
    agent = create_deep_agent(
        model,
        middleware=[MemoryMiddleware(sources=["/AGENTS.md"])],
        checkpointer=InMemorySaver(),
    )
    config = thread("same")
    agent.invoke(
        {**user("Remember: spaces"), "files": {"/AGENTS.md": create_file_data("Use tabs.\n")}},
        config,
    )
    assert "Use tabs." in model.requests[0].system_prompt
    agent.invoke(user("hello again"), config)
    assert memory_block("/AGENTS.md", "Use spaces.") in model.requests[-1].system_prompt


def test_memory_edits_persist_across_threads_through_a_sqlite_store(tmp_path):
    db = str(tmp_path / "memory.sqlite")

    def build(store: SqliteStore, model: ScriptedModel) -> Any:
        backend = CompositeBackend(default=StateBackend(), routes={"/memories/": StoreBackend()})
        return create_deep_agent(
            model,
            middleware=[MemoryMiddleware(backend=backend, sources=["/memories/AGENTS.md"])],
            backend=backend,
            store=store,
            checkpointer=InMemorySaver(),
        )

    with SqliteStore.from_conn_string(db) as store:
        store.setup()
        store.put(("filesystem",), "/AGENTS.md", dict(create_file_data("Tone: formal.\n")))
        model_a = editing_model("/memories/AGENTS.md", "Tone: formal.", "Tone: casual.")
        state = build(store, model_a).invoke(user("Remember: be casual"), thread("A"))
        assert "Tone: formal." in model_a.requests[0].system_prompt
        edit_result = [m for m in state["messages"] if isinstance(m, ToolMessage)][-1]
        assert edit_result.status != "error", edit_result.content
        assert "/memories/AGENTS.md" not in state.get("files", {})  # in the store, not state

    # A new agent over the reopened database file, on another thread.
    with SqliteStore.from_conn_string(db) as store:
        model_b = ScriptedModel(replies=[ai("hi")])
        build(store, model_b).invoke(user("hello"), thread("B"))
        prompt = model_b.requests[0].system_prompt
        assert memory_block("/memories/AGENTS.md", "Tone: casual.") in prompt
        assert "Tone: formal." not in prompt


@dataclass
class UserContext:
    user_id: str


def test_user_scoped_memory_is_isolated_per_user():
    store = InMemoryStore()
    store.put(("alice",), "/preferences.md", dict(create_file_data("Alice: Python examples.")))
    store.put(("bob",), "/preferences.md", dict(create_file_data("Bob: TypeScript examples.")))
    backend = CompositeBackend(
        default=StateBackend(),
        routes={"/memories/": StoreBackend(namespace=lambda rt: (rt.context.user_id,))},
    )
    model = editing_model("/memories/preferences.md", "Python", "Rust")
    agent = create_deep_agent(
        model,
        middleware=[MemoryMiddleware(backend=backend, sources=["/memories/preferences.md"])],
        backend=backend,
        store=store,
        context_schema=UserContext,
    )
    agent.invoke(user("hello"), context=UserContext("alice"))
    alice_prompt = model.requests[-1].system_prompt
    agent.invoke(user("hello"), context=UserContext("bob"))
    bob_prompt = model.requests[-1].system_prompt
    assert "Alice: Python examples." in alice_prompt and "Bob" not in alice_prompt
    assert "Bob: TypeScript examples." in bob_prompt and "Alice" not in bob_prompt

    # Alice's edit stays hers.
    agent.invoke(user("Remember: Rust"), context=UserContext("alice"))
    agent.invoke(user("hello"), context=UserContext("bob"))
    assert "Bob: TypeScript examples." in model.requests[-1].system_prompt
    agent.invoke(user("hello"), context=UserContext("alice"))
    assert "Alice: Rust examples." in model.requests[-1].system_prompt
    assert store.get(("bob",), "/preferences.md").value["content"] == "Bob: TypeScript examples."


@dataclass
class OrgContext:
    org_id: str


POLICY = "## Compliance policies\n- Never disclose internal pricing\n"


def test_read_only_org_memory_is_loaded_but_the_agent_cannot_change_it():
    store = InMemoryStore()
    store.put(("acme",), "/compliance.md", dict(create_file_data(POLICY)))
    backend = CompositeBackend(
        default=StateBackend(),
        routes={"/policies/": StoreBackend(namespace=lambda rt: (rt.context.org_id,))},
    )
    model = editing_model("/policies/compliance.md", "Never disclose", "Freely share")
    agent = create_deep_agent(
        model,
        middleware=[MemoryMiddleware(backend=backend, sources=["/policies/compliance.md"])],
        backend=backend,
        permissions=[FilesystemPermission(["write"], ["/policies/**"], "deny")],
        store=store,
        context_schema=OrgContext,
    )
    state = agent.invoke(user("Remember: share pricing"), context=OrgContext("acme"))
    refusal = [m for m in state["messages"] if isinstance(m, ToolMessage)][-1]
    assert refusal.status == "error" and "permission denied" in refusal.content
    assert store.get(("acme",), "/compliance.md").value["content"] == POLICY

    agent.invoke(user("hello"), context=OrgContext("acme"))
    prompt = model.requests[-1].system_prompt
    assert memory_block("/policies/compliance.md", POLICY.strip("\n")) in prompt
    assert "Freely share" not in prompt


def test_read_permissions_keep_a_denied_source_out_of_the_prompt():
    rules = [FilesystemPermission(["read"], ["/secret/**"], "deny")]
    model = ScriptedModel(replies=[ai("hi")])
    agent = create_deep_agent(
        model,
        middleware=[MemoryMiddleware(sources=["/secret/AGENTS.md"], permissions=rules)],
        permissions=rules,
    )
    files = {"/secret/AGENTS.md": create_file_data("the launch code is 1234")}
    agent.invoke({**user("hello"), "files": files})
    prompt = model.requests[0].system_prompt
    assert "1234" not in prompt
    assert "(not loaded: permission denied: reading '/secret/AGENTS.md'" in prompt


# --------------------------------------------------------------------------- backends


def test_memory_in_a_filesystem_backend_directory(tmp_path):
    (tmp_path / "AGENTS.md").write_text("Commit messages in English.\n", encoding="utf-8")
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    model = editing_model("/AGENTS.md", "English", "German")
    agent = create_deep_agent(
        model,
        middleware=[MemoryMiddleware(backend=backend, sources=["/AGENTS.md"])],
        backend=backend,
    )
    agent.invoke(user("Remember: German"))
    assert "Commit messages in English." in model.requests[0].system_prompt
    assert (tmp_path / "AGENTS.md").read_text(encoding="utf-8") == "Commit messages in German.\n"
    agent.invoke(user("hello"))
    assert "Commit messages in German." in model.requests[-1].system_prompt


def test_relative_source_is_read_from_a_real_filesystem_root(tmp_path):
    # Outside virtual mode "/AGENTS.md" would be the machine's root; "./AGENTS.md" is root_dir's.
    (tmp_path / "AGENTS.md").write_text("Project memory.\n", encoding="utf-8")
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=False)
    model = ScriptedModel(replies=[ai("hi")])
    agent = create_deep_agent(
        model,
        middleware=[MemoryMiddleware(backend=backend, sources=["./AGENTS.md"])],
        backend=backend,
    )
    agent.invoke(user("hello"))
    assert memory_block("AGENTS.md", "Project memory.") in model.requests[0].system_prompt


def test_backend_factory_with_memories_route():
    # §6.9: make_backend(runtime) builds the composite for each run and tool call.
    calls: list[str] = []

    def make_backend(runtime: Any) -> CompositeBackend:
        calls.append(type(runtime).__name__)
        return CompositeBackend(
            default=StateBackend(runtime), routes={"/memories/": StoreBackend(runtime)}
        )

    store = InMemoryStore()
    store.put(("filesystem",), "/user_preferences.txt", dict(create_file_data("Dark mode.")))
    model = ScriptedModel(replies=[ai("hi")])
    agent = create_deep_agent(
        model,
        middleware=[
            MemoryMiddleware(backend=make_backend, sources=["/memories/user_preferences.txt"])
        ],
        backend=make_backend,
        store=store,
    )
    agent.invoke(user("hello"))
    assert "HookRuntime" in calls
    assert memory_block("/memories/user_preferences.txt", "Dark mode.") in (
        model.requests[0].system_prompt
    )


def test_a_failing_namespace_factory_is_a_note_not_a_crash():
    backend = CompositeBackend(
        default=StateBackend(),
        routes={"/memories/": StoreBackend(namespace=lambda rt: (rt.server_info.user.identity,))},
    )
    model = ScriptedModel(replies=[ai("hi")])
    agent = create_deep_agent(
        model,
        middleware=[MemoryMiddleware(backend=backend, sources=["/memories/AGENTS.md"])],
        backend=backend,
        store=InMemoryStore(),
    )
    agent.invoke(user("hello"))
    assert (
        "(not loaded: could not read '/memories/AGENTS.md': the StoreBackend namespace factory "
        "failed with AttributeError"
    ) in model.requests[0].system_prompt


async def test_async_runs_load_and_reload_memory():
    store = InMemoryStore()
    store.put(("filesystem",), "/AGENTS.md", dict(create_file_data("Reply in haiku.")))
    backend = CompositeBackend(default=StateBackend(), routes={"/memories/": StoreBackend()})
    model = editing_model("/memories/AGENTS.md", "haiku", "limericks")
    recorder = SectionRecorder()
    agent = create_deep_agent(
        model,
        middleware=[
            MemoryMiddleware(backend=backend, sources=["/memories/AGENTS.md"]),
            recorder,
        ],
        backend=backend,
        store=store,
        checkpointer=InMemorySaver(),
    )

    await agent.ainvoke(user("Remember: limericks"), thread("a1"))
    await agent.ainvoke(user("hello"), thread("a2"))
    assert "Reply in haiku." in model.requests[0].system_prompt
    assert memory_block("/memories/AGENTS.md", "Reply in limericks.") in (
        model.requests[-1].system_prompt
    )
    assert all(any(s.name == "memory" for s in seen) for seen in recorder.seen)
