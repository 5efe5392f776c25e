"""`SkillsMiddleware`: loading SKILL.md catalogues from backends, and what the model sees.

Agents are real (`langchain.agents.create_agent` with fathom's middleware, or
`create_deep_agent`) and driven by a `ScriptedModel`; backends are real (state, disk,
store, composite). Nothing is mocked.
"""

from __future__ import annotations

import gc
import logging
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from fathom import create_deep_agent
from fathom.backends import CompositeBackend, FilesystemBackend, StateBackend, StoreBackend
from fathom.backends.protocol import FileDownloadResponse, LsResult, ReadResult
from fathom.backends.utils import create_file_data
from fathom.middleware.filesystem import FilesystemMiddleware
from fathom.middleware.skills import (
    MAX_DESCRIPTION_CHARS,
    MAX_SKILL_FILE_BYTES,
    SKILLS_STATE_KEY,
    SkillsMiddleware,
    SkillWarning,
    parse_skill,
    skills_section,
)
from fathom.state import DeepAgentState
from fathom.testing import ScriptedModel, ai, tool_call
from fathom.testing.scripted import ScriptRequest


def skill_md(name: str, description: str, body: str = "", **fields: str) -> str:
    """A SKILL.md with front matter and a body."""
    extra = "".join(f"{key}: {value}\n" for key, value in fields.items())
    body = body or f"# {name}\n\nBODY OF {name.upper()}: step 1, step 2, step 3.\n"
    return f"---\nname: {name}\ndescription: {description}\n{extra}---\n\n{body}"


WEB = skill_md("web-search", "Search the web for current facts.")
DOCS = skill_md("langgraph-docs", "Fetch LangGraph documentation for LangGraph questions.")


def files(mapping: dict[str, str]) -> dict[str, Any]:
    return {path: create_file_data(text) for path, text in mapping.items()}


def reader(path: str, answer: str = "done") -> ScriptedModel:
    """A model that reads `path` with `read_file` once, then answers."""

    def policy(request: ScriptRequest) -> AIMessage | str:
        if not any(isinstance(m, ToolMessage) for m in request.messages):
            return ai("", tool_call("read_file", {"file_path": path}))
        return answer

    return ScriptedModel(policy=policy)


def answering(answer: str = "done") -> ScriptedModel:
    return ScriptedModel(policy=lambda _request: answer)


def plain_agent(model: ScriptedModel, backend: Any = None, **kwargs: Any) -> Any:
    """LangChain's `create_agent` with the filesystem tools and skills over one backend."""
    sources = kwargs.pop("sources", ["/skills/"])
    return create_agent(
        model,
        middleware=[
            FilesystemMiddleware(backend=backend),
            SkillsMiddleware(backend=backend, sources=sources),
        ],
        state_schema=DeepAgentState,
        **kwargs,
    )


def load(backend: Any, sources: list[str], state: dict[str, Any] | None = None) -> list[dict]:
    """The catalogue `SkillsMiddleware` reads from `backend` (outside a graph)."""
    return SkillsMiddleware(backend=backend, sources=sources).load_skills(state or {}, None)


def names(skills: list[dict]) -> list[str]:
    return [s["name"] for s in skills]


@pytest.fixture
def no_warnings() -> Iterator[None]:
    """Warnings the code under test raises fail the test.

    Not `ResourceWarning`: the garbage collector raises those for whatever an earlier test in
    the same process left unclosed, at whatever moment it runs, so they say nothing of this
    test (the first collection clears what is already garbage before the block).
    """
    gc.collect()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("default", ResourceWarning)
        yield


# --------------------------------------------------------------------------- parsing


def test_parse_valid_skill_keeps_other_fields():
    text = (
        skill_md(
            "pdf-tools",
            "Work with PDF files.",
            license="Apache-2.0",
            **{"allowed-tools": "read_file grep"},
        )
        + "metadata: not front matter\n"
    )
    text = text.replace("---\n\n", "metadata:\n  author: ada\n  2: two\n---\n\n", 1)
    entry, problems = parse_skill(
        text, path="/s/pdf-tools/SKILL.md", source="/s/", directory_name="pdf-tools"
    )
    assert problems == []
    assert entry == {
        "name": "pdf-tools",
        "description": "Work with PDF files.",
        "path": "/s/pdf-tools/SKILL.md",
        "source": "/s/",
        "license": "Apache-2.0",
        "compatibility": None,
        "metadata": {"author": "ada", "2": "two"},
        "allowed_tools": ["read_file", "grep"],
        "extra": {
            "license": "Apache-2.0",
            "allowed-tools": "read_file grep",
            "metadata": {"author": "ada", "2": "two"},  # keys made strings for checkpoints
        },
    }


def test_parse_accepts_crlf_and_bom():
    text = "\ufeff---\r\nname: a\r\ndescription: b\r\n---\r\nbody\r\n"
    entry, problems = parse_skill(text, path="/s/a/SKILL.md", source="/s/", directory_name="a")
    assert problems == [] and entry is not None
    assert (entry["name"], entry["description"]) == ("a", "b")


def test_parse_cuts_a_long_description():
    long = "x" * (MAX_DESCRIPTION_CHARS + 500)
    entry, problems = parse_skill(
        skill_md("big", long), path="/s/big/SKILL.md", source="/s/", directory_name="big"
    )
    assert entry is not None and entry["description"] == "x" * MAX_DESCRIPTION_CHARS
    assert len(problems) == 1 and "cut to 1,024" in problems[0]
    exact = "y" * MAX_DESCRIPTION_CHARS
    entry, problems = parse_skill(
        skill_md("big", exact), path="/s/big/SKILL.md", source="/s/", directory_name="big"
    )
    assert entry is not None and entry["description"] == exact and problems == []


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("# just markdown\n", "does not start with YAML front matter"),
        ("---\nname: a\ndescription: b\n", "has no closing '---' line"),
        ("---\nname: [a\ndescription: b\n---\n", "not valid YAML"),
        ("---\n- a\n- b\n---\n", "must be a mapping"),
        ("---\ndescription: b\n---\n---\nbody\n", "has no 'name'"),  # `---` in the body
        ("---\nname: a\ndescription: b\ndate: 2024-13-45\n---\n", "not valid YAML"),
        ("---\nname: a\ndescription: b\n  bad: indent\n---\n", "SKILL.md`, line 4: its front"),
        ("---\ndescription: b\n---\n", "has no 'name'"),
        ("---\nname: a\n---\n", "has no 'description'"),
        ("---\nname: a\ndescription: 42\n---\n", "'description' must be a non-empty string"),
        ("---\nname: a\ndescription: '  '\n---\n", "'description' must be a non-empty string"),
        ("---\nname: other\ndescription: b\n---\n", "differs from its directory name 'a'"),
    ],
)
def test_parse_rejects(text, reason):
    entry, problems = parse_skill(text, path="/s/a/SKILL.md", source="/s/", directory_name="a")
    assert entry is None
    assert len(problems) == 1 and reason in problems[0] and "/s/a/SKILL.md" in problems[0]


def test_sources_are_checked():
    with pytest.raises(TypeError, match="not a single string"):
        SkillsMiddleware(sources="/skills/")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be strings"):
        SkillsMiddleware(sources=["/skills/", 3])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="forward slashes"):
        SkillsMiddleware(sources=["C:\\skills\\"])
    with pytest.raises(ValueError, match="empty"):
        SkillsMiddleware(sources=[""])
    middleware = SkillsMiddleware(sources=("/skills/user/", "/skills/project/"))
    assert middleware.sources == ("/skills/user/", "/skills/project/")
    assert isinstance(middleware.backend, StateBackend)


# --------------------------------------------------------------------------- loading


def test_loads_every_skill_of_a_source_by_name(no_warnings):
    state = {
        "files": files(
            {
                "/skills/web-search/SKILL.md": WEB,
                "/skills/langgraph-docs/SKILL.md": DOCS,
                "/skills/langgraph-docs/reference.md": "not a skill file",
                "/skills/notes/todo.md": "a folder without SKILL.md is not a skill",
                "/skills/README.md": "a file directly in the source",
            }
        )
    }
    skills = load(StateBackend(), ["/skills/"], state)
    assert skills == [
        {
            "name": "langgraph-docs",
            "description": "Fetch LangGraph documentation for LangGraph questions.",
            "path": "/skills/langgraph-docs/SKILL.md",
            "source": "/skills/",
            "license": None,
            "compatibility": None,
            "metadata": {},
            "allowed_tools": [],
            "extra": {},
        },
        {
            "name": "web-search",
            "description": "Search the web for current facts.",
            "path": "/skills/web-search/SKILL.md",
            "source": "/skills/",
            "license": None,
            "compatibility": None,
            "metadata": {},
            "allowed_tools": [],
            "extra": {},
        },
    ]


def test_a_missing_source_is_skipped_quietly(no_warnings, caplog):
    state = {"files": files({"/skills/project/web-search/SKILL.md": WEB})}
    with caplog.at_level(logging.WARNING, logger="fathom.skills"):
        skills = load(StateBackend(), ["/skills/user/", "/skills/project/"], state)
    assert names(skills) == ["web-search"]
    assert caplog.records == []


def test_later_source_wins():
    user = skill_md("web-search", "User-level web search.")
    project = skill_md("web-search", "Project-level web search.")
    state = {
        "files": files(
            {
                "/skills/user/web-search/SKILL.md": user,
                "/skills/user/only-user/SKILL.md": skill_md("only-user", "Only in user."),
                "/skills/project/web-search/SKILL.md": project,
            }
        )
    }
    skills = load(StateBackend(), ["/skills/user/", "/skills/project/"], state)
    assert [(s["name"], s["source"], s["description"]) for s in skills] == [
        ("only-user", "/skills/user/", "Only in user."),
        ("web-search", "/skills/project/", "Project-level web search."),
    ]
    reversed_order = load(StateBackend(), ["/skills/project/", "/skills/user/"], state)
    assert reversed_order[1]["path"] == "/skills/user/web-search/SKILL.md"


def test_an_invalid_later_skill_does_not_hide_the_earlier_one():
    state = {
        "files": files(
            {
                "/skills/user/web-search/SKILL.md": WEB,
                "/skills/project/web-search/SKILL.md": "---\nname: [broken\n---\n",
            }
        )
    }
    with pytest.warns(SkillWarning, match="not valid YAML"):
        skills = load(StateBackend(), ["/skills/user/", "/skills/project/"], state)
    assert [s["path"] for s in skills] == ["/skills/user/web-search/SKILL.md"]


def test_a_source_that_is_one_skill_folder():
    state = {
        "files": files(
            {
                "/skills/web-search/SKILL.md": WEB,
                "/skills/web-search/scripts/search.py": "print('hi')",
                "/skills/research/arxiv/SKILL.md": skill_md("arxiv", "Search arXiv."),
            }
        )
    }
    skills = load(StateBackend(), ["/skills/web-search/", "/skills/research/"], state)
    assert [s["path"] for s in skills] == [
        "/skills/research/arxiv/SKILL.md",
        "/skills/web-search/SKILL.md",
    ]


def test_invalid_skills_warn_and_are_logged_others_still_load(caplog):
    state = {
        "files": files(
            {
                "/skills/web-search/SKILL.md": WEB,
                "/skills/bad-yaml/SKILL.md": "---\nname: bad-yaml\ndescription: [oops\n---\n",
                "/skills/no-front/SKILL.md": "# no front matter\n",
                "/skills/no-desc/SKILL.md": "---\nname: no-desc\n---\n",
                "/skills/renamed/SKILL.md": skill_md("other-name", "Mismatched."),
            }
        )
    }
    with (
        caplog.at_level(logging.WARNING, logger="fathom.skills"),
        pytest.warns(SkillWarning) as record,
    ):
        skills = load(StateBackend(), ["/skills/"], state)
    assert names(skills) == ["web-search"]
    messages = sorted(str(w.message) for w in record)
    assert len(messages) == 4
    assert all(m.startswith("Skipped skill `/skills/") for m in messages)
    assert sorted(r.getMessage() for r in caplog.records) == messages
    assert all(r.name == "fathom.skills" for r in caplog.records)


def test_a_binary_skill_file_is_skipped():
    state = {"files": {"/skills/bin/SKILL.md": create_file_data(b"\x00\x01\x02")}}
    with pytest.warns(SkillWarning, match="binary"):
        assert load(StateBackend(), ["/skills/"], state) == []


def test_a_skill_over_10_mib_is_skipped_in_state():

    def sized(name: str, size: int) -> str:
        head = f"---\nname: {name}\ndescription: Big.\n---\n"
        return head + "x" * (size - len(head))

    state = {
        "files": files(
            {
                "/skills/huge/SKILL.md": sized("huge", MAX_SKILL_FILE_BYTES + 1),
                "/skills/limit/SKILL.md": sized("limit", MAX_SKILL_FILE_BYTES),
                "/skills/web-search/SKILL.md": WEB,
            }
        )
    }
    with pytest.warns(SkillWarning, match="10,485,761 bytes, over the 10,485,760-byte limit"):
        skills = load(StateBackend(), ["/skills/"], state)
    assert names(skills) == ["limit", "web-search"]  # exactly 10 MiB still loads


def test_a_skill_over_10_mib_is_skipped_on_disk(tmp_path):
    (tmp_path / "skills" / "huge").mkdir(parents=True)
    (tmp_path / "skills" / "web-search").mkdir()
    head = b"---\nname: huge\ndescription: Too big.\n---\n"
    (tmp_path / "skills" / "huge" / "SKILL.md").write_bytes(
        head + b"x" * (MAX_SKILL_FILE_BYTES + 1 - len(head))
    )
    (tmp_path / "skills" / "web-search" / "SKILL.md").write_text(WEB)
    # the middleware's own limit, when the backend would read more
    roomy = FilesystemBackend(root_dir=tmp_path, virtual_mode=True, max_file_size_mb=20)
    with pytest.warns(SkillWarning, match="over the 10,485,760-byte limit for a SKILL.md"):
        assert names(load(roomy, ["/skills/"])) == ["web-search"]
    # the backend's default limit (10 MiB) refuses the read: skipped all the same
    default = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    with pytest.warns(SkillWarning, match="Skipped skill `/skills/huge/SKILL.md`"):
        assert names(load(default, ["/skills/"])) == ["web-search"]


def test_a_source_the_backend_refuses_warns(tmp_path):
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    with pytest.warns(SkillWarning, match=r"Cannot load skills from '/\.\./skills/'"):
        assert load(backend, ["/../skills/"]) == []


# --------------------------------------------------------------------------- the prompt


def test_section_lists_names_descriptions_and_paths_only():
    skills = load(
        StateBackend(),
        ["/skills/"],
        {
            "files": files(
                {"/skills/web-search/SKILL.md": WEB, "/skills/langgraph-docs/SKILL.md": DOCS}
            )
        },
    )
    section = skills_section(skills)
    assert section is not None and (section.name, section.stability) == ("skills", "stable")
    assert "- langgraph-docs (`/skills/langgraph-docs/SKILL.md`): Fetch LangGraph" in section.text
    assert "- web-search (`/skills/web-search/SKILL.md`): Search the web" in section.text
    assert "BODY OF" not in section.text
    assert "read_file" in section.text
    assert skills_section([]) is None


def test_section_keeps_each_skill_on_one_line():
    folded = "---\nname: a\ndescription: >\n  first line\n  second line\n\n  third\n---\n"
    entry, _ = parse_skill(folded, path="/s/a/SKILL.md", source="/s/", directory_name="a")
    section = skills_section([entry])
    assert section is not None
    assert "- a (`/s/a/SKILL.md`): first line second line third\n" in section.text


# --------------------------------------------------------------------------- through an agent


def test_agent_prompt_lists_skills_and_read_file_brings_the_body():
    model = reader("/skills/web-search/SKILL.md", "Searched as the skill says.")
    agent = plain_agent(model)
    result = agent.invoke(
        {
            "messages": [HumanMessage("What is the weather in Paris today?")],
            "files": files(
                {"/skills/web-search/SKILL.md": WEB, "/skills/langgraph-docs/SKILL.md": DOCS}
            ),
        }
    )
    first, second = model.requests
    assert "## Skills" in first.system_prompt
    assert "web-search (`/skills/web-search/SKILL.md`): Search the web for current facts." in (
        first.system_prompt
    )
    assert "langgraph-docs" in first.system_prompt
    assert "BODY OF" not in first.system_prompt
    assert not any("BODY OF" in str(m.content) for m in first.messages)
    # the body arrives only through the tool call, in the conversation
    (read,) = [m for m in second.messages if isinstance(m, ToolMessage)]
    assert "BODY OF WEB-SEARCH" in read.content
    assert "BODY OF" not in second.system_prompt
    assert result["messages"][-1].content == "Searched as the skill says."
    assert SKILLS_STATE_KEY not in result  # private: not part of the output


def test_no_skills_means_no_section(no_warnings):
    model = answering()
    plain_agent(model).invoke({"messages": [HumanMessage("hi")]})
    assert "## Skills" not in model.requests[0].system_prompt


def test_skills_from_a_filesystem_directory(tmp_path):
    for name, text in {"web-search": WEB, "langgraph-docs": DOCS}.items():
        (tmp_path / "skills" / name).mkdir(parents=True)
        (tmp_path / "skills" / name / "SKILL.md").write_text(text)
    (tmp_path / "skills" / "langgraph-docs" / "guide.md").write_text("see SKILL.md")
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    model = reader("/skills/langgraph-docs/SKILL.md")
    plain_agent(model, backend).invoke({"messages": [HumanMessage("What is LangGraph?")]})
    prompt = model.requests[0].system_prompt
    assert "langgraph-docs (`/skills/langgraph-docs/SKILL.md`)" in prompt
    assert "web-search (`/skills/web-search/SKILL.md`)" in prompt
    assert "BODY OF LANGGRAPH-DOCS" in model.requests[1].messages[-1].content


def test_skills_from_a_store_route_of_a_composite_backend():
    store = InMemoryStore()
    store.put(("filesystem",), "/web-search/SKILL.md", create_file_data(WEB))
    backend = CompositeBackend(default=StateBackend(), routes={"/skills/": StoreBackend()})
    model = reader("/skills/web-search/SKILL.md")
    agent = plain_agent(model, backend, sources=["/skills/", "/local/"], store=store)
    agent.invoke(
        {
            "messages": [HumanMessage("search something")],
            "files": files({"/local/langgraph-docs/SKILL.md": DOCS}),
        }
    )
    prompt = model.requests[0].system_prompt
    assert "web-search (`/skills/web-search/SKILL.md`)" in prompt  # from the store
    assert "langgraph-docs (`/local/langgraph-docs/SKILL.md`)" in prompt  # from state
    assert "BODY OF WEB-SEARCH" in model.requests[1].messages[-1].content


def test_a_skill_added_between_runs_appears_in_the_next_prompt(tmp_path):
    (tmp_path / "skills" / "web-search").mkdir(parents=True)
    (tmp_path / "skills" / "web-search" / "SKILL.md").write_text(WEB)
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=True)
    model = answering()
    agent = plain_agent(model, backend, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [HumanMessage("one")]}, config)
    (tmp_path / "skills" / "langgraph-docs").mkdir()
    (tmp_path / "skills" / "langgraph-docs" / "SKILL.md").write_text(DOCS)
    agent.invoke({"messages": [HumanMessage("two")]}, config)
    first, second = (r.system_prompt for r in model.requests)
    assert "langgraph-docs" not in first and "web-search" in first
    assert "langgraph-docs (`/skills/langgraph-docs/SKILL.md`)" in second
    stored = agent.get_state(config).values[SKILLS_STATE_KEY]
    assert names(stored) == ["langgraph-docs", "web-search"]


def test_a_state_skill_added_in_the_second_run_of_a_thread():
    model = answering()
    agent = plain_agent(model, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke(
        {"messages": [HumanMessage("one")], "files": files({"/skills/web-search/SKILL.md": WEB})},
        config,
    )
    agent.invoke(
        {
            "messages": [HumanMessage("two")],
            "files": files({"/skills/langgraph-docs/SKILL.md": DOCS}),
        },
        config,
    )
    first, second = (r.system_prompt for r in model.requests)
    assert "langgraph-docs" not in first
    assert "langgraph-docs" in second and "web-search" in second


def test_the_catalogue_is_written_only_when_it_changes():
    model = answering()
    agent = plain_agent(model, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    stored = files({"/skills/web-search/SKILL.md": WEB})

    def hook_updates(message: str, extra: dict[str, Any] | None = None) -> list[Any]:
        chunks = agent.stream(
            {"messages": [HumanMessage(message)], **(extra or {})}, config, stream_mode="updates"
        )
        return [
            update
            for chunk in chunks
            for node, update in chunk.items()
            if node == "SkillsMiddleware.before_agent"
        ]

    assert hook_updates("one", {"files": stored}) == [
        {SKILLS_STATE_KEY: load(StateBackend(), ["/skills/"], {"files": stored}),
         "skills_load_errors": []}
    ]
    assert hook_updates("two") == [None]  # same catalogue: nothing written
    more = files({"/skills/langgraph-docs/SKILL.md": DOCS})
    (changed,) = hook_updates("three", {"files": more})
    assert names(changed[SKILLS_STATE_KEY]) == ["langgraph-docs", "web-search"]


def test_the_catalogue_cannot_be_set_from_the_input(no_warnings):
    model = answering()
    forged = [{"name": "evil", "description": "x", "path": "/e", "source": "/", "extra": {}}]
    plain_agent(model).invoke({"messages": [HumanMessage("hi")], SKILLS_STATE_KEY: forged})
    assert "evil" not in model.requests[0].system_prompt


def test_with_create_deep_agent_middleware():
    model = reader("/skills/langgraph-docs/SKILL.md", "LangGraph is a framework.")
    agent = create_deep_agent(model, middleware=[SkillsMiddleware(sources=["/skills/"])])
    result = agent.invoke(
        {
            "messages": [HumanMessage("What is LangGraph?")],
            "files": files({"/skills/langgraph-docs/SKILL.md": DOCS}),
        }
    )
    first, second = model.requests
    assert "langgraph-docs (`/skills/langgraph-docs/SKILL.md`)" in first.system_prompt
    assert "BODY OF" not in first.system_prompt
    assert "BODY OF LANGGRAPH-DOCS" in second.messages[-1].content
    assert result["messages"][-1].content == "LangGraph is a framework."


class RecordingStore(StoreBackend):
    """A real `StoreBackend` that notes which of its methods ran."""

    calls: list[str]

    def ls(self, path: str) -> LsResult:
        self.calls.append("ls")
        return super().ls(path)

    def read(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        self.calls.append("read")
        return super().read(file_path, offset, limit)

    async def als(self, path: str) -> LsResult:
        self.calls.append("als")
        return await super().als(path)

    async def aread(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        self.calls.append("aread")
        return await super().aread(file_path, offset, limit)

    def download_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        self.calls.append("download_files")
        return super().download_files(paths)

    async def adownload_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        self.calls.append("adownload_files")
        return await super().adownload_files(paths)


async def test_ainvoke_loads_through_the_async_backend_methods():
    store = InMemoryStore()
    await store.aput(("filesystem",), "/skills/web-search/SKILL.md", create_file_data(WEB))
    await store.aput(("filesystem",), "/skills/broken/SKILL.md", create_file_data("# none\n"))
    backend = RecordingStore()
    backend.calls = []
    model = reader("/skills/web-search/SKILL.md", "async done")
    agent = plain_agent(model, backend, sources=["/skills/", "/missing/"], store=store)
    with pytest.warns(SkillWarning, match="Skipped skill `/skills/broken/SKILL.md`"):
        result = await agent.ainvoke({"messages": [HumanMessage("search")]})
    assert "web-search (`/skills/web-search/SKILL.md`)" in model.requests[0].system_prompt
    assert "BODY OF WEB-SEARCH" in model.requests[1].messages[-1].content
    assert result["messages"][-1].content == "async done"
    # loading: one listing per source and one download of its SKILL.md files, all async;
    # then the model's read_file
    assert backend.calls[:4] == ["als", "adownload_files", "als", "aread"]
    assert "ls" not in backend.calls and "download_files" not in backend.calls


def test_a_backend_factory_is_called_for_the_hook(tmp_path):
    (tmp_path / "user-1" / "skills" / "web-search").mkdir(parents=True)
    (tmp_path / "user-1" / "skills" / "web-search" / "SKILL.md").write_text(WEB)
    seen: list[Any] = []

    def factory(runtime: Any) -> FilesystemBackend:
        seen.append(runtime.context)
        return FilesystemBackend(root_dir=tmp_path / runtime.context["user"], virtual_mode=True)

    model = answering()
    agent = plain_agent(model, factory)
    agent.invoke({"messages": [HumanMessage("hi")]}, context={"user": "user-1"})
    assert "web-search (`/skills/web-search/SKILL.md`)" in model.requests[0].system_prompt
    assert seen and seen[0] == {"user": "user-1"}


def test_skills_section_sits_with_the_stable_sections():
    model = answering()
    agent = create_deep_agent(
        model, system_prompt="You are terse.", middleware=[SkillsMiddleware(sources=["/s/"])]
    )
    agent.invoke(
        {"messages": [HumanMessage("hi")], "files": files({"/s/web-search/SKILL.md": WEB})}
    )
    prompt = model.requests[0].system_prompt
    assert prompt.startswith("You are terse.")
    assert prompt.index("## Skills") > prompt.index("## Planning")


def test_example_paths_resolve(tmp_path: Path):
    """Non-virtual FilesystemBackend: absolute host paths as sources (tutorial §3.7)."""
    skills_dir = tmp_path / "skills" / "langgraph-docs"
    skills_dir.mkdir(parents=True)
    (skills_dir / "SKILL.md").write_text(DOCS)
    backend = FilesystemBackend(root_dir=tmp_path, virtual_mode=False)
    skills = load(backend, [f"{tmp_path}/skills/"])
    assert [s["path"] for s in skills] == [f"{skills_dir}/SKILL.md"]
