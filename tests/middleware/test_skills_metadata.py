"""Skill metadata the Agent Skills way, and sources rescanned on every run of a thread."""

from __future__ import annotations

import warnings

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from fathom import create_deep_agent
from fathom.backends import FilesystemBackend
from fathom.middleware.skills import (
    MAX_COMPATIBILITY_CHARS,
    SKILLS_STATE_KEY,
    SkillWarning,
    parse_skill,
)
from fathom.testing import ScriptedModel

FULL = """---
name: pdf-tools
description: Fill and merge PDF forms.
license: Apache-2.0
compatibility: Needs python3 and the pypdf package
allowed-tools: read_file, execute grep
metadata:
  author: docs-team
  version: 2
  include_tools: [fill_form, merge]
---
# PDF tools
"""


def parse(content: str) -> tuple[dict, list[str]]:
    entry, problems = parse_skill(
        content, path="/skills/pdf-tools/SKILL.md", source="/skills/", directory_name="pdf-tools"
    )
    assert entry is not None, problems
    return dict(entry), problems


def test_the_spec_fields_are_parsed_like_the_reference():
    entry, problems = parse(FULL)
    assert problems == []
    assert entry["license"] == "Apache-2.0"
    assert entry["compatibility"] == "Needs python3 and the pypdf package"
    assert entry["allowed_tools"] == ["read_file", "execute", "grep"]
    assert entry["metadata"] == {
        "author": "docs-team",
        "version": "2",
        "include_tools": "fill_form merge",
    }


def test_absent_fields_have_the_reference_defaults():
    entry, problems = parse("---\nname: pdf-tools\ndescription: d\n---\n")
    assert problems == []
    assert entry["license"] is None and entry["compatibility"] is None
    assert entry["metadata"] == {} and entry["allowed_tools"] == []


def test_a_list_of_allowed_tools_is_accepted():
    entry, _ = parse("---\nname: pdf-tools\ndescription: d\nallowed-tools: [ls, ' glob ', 3]\n---")
    assert entry["allowed_tools"] == ["ls", "glob"]


@pytest.mark.parametrize(
    ("field", "note"),
    [
        ("metadata: just text", "its metadata is str, not a mapping"),
        ("allowed-tools: 7", "its allowed-tools is int"),
        (f"compatibility: {'x' * (MAX_COMPATIBILITY_CHARS + 5)}", "it was cut to 500"),
    ],
)
def test_bad_optional_fields_are_noted_and_the_skill_still_loads(field, note):
    entry, problems = parse(f"---\nname: pdf-tools\ndescription: d\n{field}\n---\n")
    assert len(problems) == 1 and note in problems[0]
    assert "`/skills/pdf-tools/SKILL.md`" in problems[0]
    assert len(entry["compatibility"] or "") <= MAX_COMPATIBILITY_CHARS


def test_a_skill_added_to_a_checkpointed_thread_is_listed_in_its_next_run(tmp_path):
    skills = tmp_path / "skills"
    (skills / "pdf-tools").mkdir(parents=True)
    (skills / "pdf-tools" / "SKILL.md").write_text(FULL)
    model = ScriptedModel(policy=lambda _request: "done")
    agent = create_deep_agent(
        model,
        backend=FilesystemBackend(root_dir=tmp_path, virtual_mode=True),
        skills=["/skills/"],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [HumanMessage("one")]}, config)
    (skills / "web-search").mkdir()
    (skills / "web-search" / "SKILL.md").write_text(
        "---\nname: web-search\ndescription: Search the web.\n---\n"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", SkillWarning)
        agent.invoke({"messages": [HumanMessage("two")]}, config)
    first, second = (r.system_prompt or "" for r in model.requests)
    assert "pdf-tools" in first and "web-search" not in first
    assert "web-search (`/skills/web-search/SKILL.md`)" in second and "pdf-tools" in second
    stored = agent.get_state(config).values[SKILLS_STATE_KEY]
    assert {s["name"]: s["allowed_tools"] for s in stored} == {
        "pdf-tools": ["read_file", "execute", "grep"],
        "web-search": [],
    }
