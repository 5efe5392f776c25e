"""The middleware stack `create_deep_agent` composes, pinned.

A refactor that reorders, adds or drops a middleware changes what every agent does (the
order decides which hook wraps which), so the stacks of a default agent and of an agent
with every option are pinned here, for the main agent and for each subagent. The stacks
are read from the real `create_agent` calls (recorded, then passed through unchanged).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

import fathom.agent
from fathom import create_deep_agent
from fathom.backends import LocalShellBackend
from fathom.middleware.permissions import FilesystemPermission
from fathom.testing import ScriptedModel

Stacks = list[tuple[str | None, list[str], list[str]]]


@pytest.fixture
def stacks(monkeypatch: pytest.MonkeyPatch) -> Stacks:
    """Each `create_agent` call's agent name, middleware class names and tool names.

    Anthropic prompt caching joins the stack only once `langchain_anthropic` has been
    imported (by any earlier test in this process), so the pinned stacks are taken with it
    unimported; `test_anthropic_prompt_caching_follows_the_subagents` pins where it goes.
    """
    monkeypatch.delitem(sys.modules, "langchain_anthropic", raising=False)
    seen: Stacks = []
    real = fathom.agent.create_agent

    def recording(model: Any, **kwargs: Any) -> Any:
        middleware = kwargs.get("middleware") or []
        tools = [getattr(t, "name", "") for m in middleware for t in getattr(m, "tools", ())]
        tools += [getattr(t, "name", getattr(t, "__name__", "")) for t in kwargs.get("tools") or ()]
        seen.append((kwargs.get("name"), [type(m).__name__ for m in middleware], tools))
        return real(model, **kwargs)

    monkeypatch.setattr(fathom.agent, "create_agent", recording)
    return seen


@tool
def send_email(to: str) -> str:
    """Send an email."""
    return f"sent to {to}"


FILE_TOOLS = ["ls", "read_file", "write_file", "edit_file", "delete", "glob", "grep"]
ASYNC_TOOLS = ["start_async_task", "check_async_task", "update_async_task",
               "cancel_async_task", "list_async_tasks"]


def test_a_default_agent_has_the_default_stack(stacks: Stacks) -> None:
    create_deep_agent(ScriptedModel(replies=["x"]))
    assert stacks == [
        ("general-purpose", [
            "ToolArgsFromMessagesMiddleware", "FilesystemMiddleware", "SummarizationMiddleware",
            "ParentNotifierMiddleware", "PatchToolCallsMiddleware", "PromptAssemblyMiddleware",
            "UnsupportedContentMiddleware",
        ], FILE_TOOLS),
        (None, [
            "ToolArgsFromMessagesMiddleware", "PlanningMiddleware", "FilesystemMiddleware",
            "SubAgentMiddleware", "SummarizationMiddleware", "ParentNotifierMiddleware",
            "PatchToolCallsMiddleware", "PromptAssemblyMiddleware",
            "UnsupportedContentMiddleware",
        ], ["write_todos", *FILE_TOOLS, "task"]),
    ]  # fmt: skip


def test_an_agent_with_every_option_has_the_full_stack(stacks: Stacks) -> None:
    create_deep_agent(
        ScriptedModel(replies=["x"]),
        tools=[send_email],
        subagents=[
            {"name": "mailer", "description": "sends mail", "system_prompt": "Mail.",
             "tools": [send_email]},
            {"name": "researcher", "description": "researches", "graph_id": "researcher"},
        ],
        skills=["/skills/"],
        memory=["/AGENTS.md"],
        permissions=[FilesystemPermission(operations=["write"], paths=["/etc/**"], mode="deny")],
        interrupt_on={"send_email": True, "write_file": True},
        checkpointer=InMemorySaver(),
        code_interpreter=True,
    )  # fmt: skip
    assert stacks == [
        ("general-purpose", [
            "ToolArgsFromMessagesMiddleware", "SkillsMiddleware", "FilesystemMiddleware",
            "SummarizationMiddleware", "ParentNotifierMiddleware", "HumanInTheLoopMiddleware",
            "PatchToolCallsMiddleware", "PromptAssemblyMiddleware",
            "UnsupportedContentMiddleware",
        ], [*FILE_TOOLS, "send_email"]),
        ("mailer", [
            "ToolArgsFromMessagesMiddleware", "FilesystemMiddleware", "SummarizationMiddleware",
            "ParentNotifierMiddleware", "HumanInTheLoopMiddleware", "PatchToolCallsMiddleware",
            "PromptAssemblyMiddleware",
            "UnsupportedContentMiddleware",
        ], [*FILE_TOOLS, "send_email"]),
        (None, [
            "ToolArgsFromMessagesMiddleware", "PlanningMiddleware", "MemoryMiddleware",
            "SkillsMiddleware", "FilesystemMiddleware", "SubAgentMiddleware",
            "SummarizationMiddleware", "ParentNotifierMiddleware", "CodeInterpreterMiddleware",
            "AsyncSubAgentMiddleware", "HumanInTheLoopMiddleware", "PatchToolCallsMiddleware",
            "PromptAssemblyMiddleware",
            "UnsupportedContentMiddleware",
        ], ["write_todos", *FILE_TOOLS, "task", "eval", *ASYNC_TOOLS, "send_email"]),
    ]  # fmt: skip


def test_a_backend_that_runs_commands_adds_execute(stacks: Stacks, tmp_path: Path) -> None:
    create_deep_agent(ScriptedModel(replies=["x"]),
                      backend=LocalShellBackend(tmp_path, virtual_mode=True))
    main = stacks[-1]
    assert main[1] == [
        "ToolArgsFromMessagesMiddleware", "PlanningMiddleware", "FilesystemMiddleware",
        "SubAgentMiddleware", "ExecuteMiddleware", "SummarizationMiddleware",
        "ParentNotifierMiddleware", "PatchToolCallsMiddleware", "PromptAssemblyMiddleware",
            "UnsupportedContentMiddleware",
    ]  # fmt: skip
    assert main[2] == ["write_todos", *FILE_TOOLS, "task", "execute"]


def test_anthropic_prompt_caching_follows_the_subagents(
    stacks: Stacks, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("langchain_anthropic")
    import langchain_anthropic

    monkeypatch.setitem(sys.modules, "langchain_anthropic", langchain_anthropic)
    create_deep_agent(ScriptedModel(replies=["x"]))
    main = stacks[-1][1]
    helper = stacks[0][1]
    assert main[main.index("SubAgentMiddleware") + 1] == "AnthropicPromptCachingMiddleware"
    assert helper[helper.index("FilesystemMiddleware") + 1] == "AnthropicPromptCachingMiddleware"
