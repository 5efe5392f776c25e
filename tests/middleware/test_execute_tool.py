"""The `execute` tool end to end: `create_deep_agent` + `ExecuteMiddleware` + real commands."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage

from fathom import create_deep_agent
from fathom.backends.filesystem import FilesystemBackend
from fathom.backends.shell._runner import timeout_note
from fathom.backends.shell.local import LocalShellBackend
from fathom.middleware.execute import EXECUTE_PROMPT, EXECUTE_STREAM_EVENT, ExecuteMiddleware
from fathom.testing import ScriptedModel, ai, tool_call

FINAL = "done"
GO = {"messages": [{"role": "user", "content": "go"}]}


@pytest.fixture(params=["invoke", "ainvoke"])
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


def build(backend: Any, *calls: Any, middleware_backend: Any = None) -> tuple[Any, ScriptedModel]:
    model = ScriptedModel(replies=[ai("", *calls), ai(FINAL)])
    shell = ExecuteMiddleware(backend=backend if middleware_backend is None else middleware_backend)
    agent = create_deep_agent(model, backend=backend, middleware=[shell])
    return agent, model


def run(mode: str, backend: Any, *calls: Any, **kwargs: Any) -> tuple[ToolMessage, ScriptedModel]:
    agent, model = build(backend, *calls, **kwargs)
    result = asyncio.run(agent.ainvoke(GO)) if mode == "ainvoke" else agent.invoke(GO)
    assert result["messages"][-1].content == FINAL
    (message,) = [m for m in result["messages"] if m.type == "tool"]
    seen = model.requests[1].messages[-1]
    assert seen.type == "tool" and seen.text == message.text
    return message, model


def test_execute_output_reaches_the_model(mode: str, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello from disk\n")
    backend = LocalShellBackend(root_dir=tmp_path)
    message, model = run(mode, backend, tool_call("execute", {"command": "cat notes.txt; pwd"}))
    assert message.status == "success"
    assert message.name == "execute"
    assert message.text == f"hello from disk\n{tmp_path.resolve()}\n[exit code 0]"
    first = model.requests[0]
    assert "execute" in first.tool_names
    assert "## Shell" in (first.system_prompt or "")
    assert EXECUTE_PROMPT in (first.system_prompt or "")


def test_non_zero_exit_is_an_error(mode: str, tmp_path: Path) -> None:
    backend = LocalShellBackend(root_dir=tmp_path)
    call = tool_call("execute", {"command": "echo nope >&2; exit 3"})
    message, _ = run(mode, backend, call)
    assert message.status == "error"
    assert message.text == "[stderr] nope\n[exit code 3]"


def test_timeout_argument_kills_the_command(mode: str, tmp_path: Path) -> None:
    backend = LocalShellBackend(root_dir=tmp_path, timeout=60)
    # 3 s, not less: the `echo start` before the kill must come out on a loaded machine too.
    call = tool_call("execute", {"command": "echo start; sleep 30", "timeout": 3})
    message, _ = run(mode, backend, call)
    assert message.status == "error"
    note = timeout_note(3, custom=True)
    assert message.text == f"start\n{note}\n[exit code 124]"


def test_output_past_the_capture_cap_is_stopped_and_flagged(mode: str, tmp_path: Path) -> None:
    backend = LocalShellBackend(root_dir=tmp_path, max_output_bytes=2_000)
    message, _ = run(mode, backend, tool_call("execute", {"command": "yes"}))
    assert message.status == "error"
    assert len(message.text) < 2_600
    assert "cut at the backend's output capture cap" in message.text
    assert message.text.endswith("[exit code 137]")


def _numbered(count: int) -> str:
    return "".join(f"line {n:05d}\n" for n in range(1, count + 1))


def test_long_output_is_offloaded_to_a_file_the_model_pages(mode: str, tmp_path: Path) -> None:
    """Output past the inline limit is not lost: its head and tail are shown, the whole
    capture is saved under /large_tool_results/, and read_file pages it."""
    backend = LocalShellBackend(root_dir=tmp_path, virtual_mode=True)
    path = "/large_tool_results/execute_big.txt"
    replies = [
        ai("", tool_call("execute", {"command": "seq -f 'line %05g' 1 20000"}, id="big")),
        ai("", tool_call("read_file", {"file_path": path, "offset": 12344, "limit": 3})),
        ai(FINAL),
    ]
    model = ScriptedModel(replies=replies)
    middleware = [ExecuteMiddleware(backend=backend, max_inline_chars=1_000)]
    agent = create_deep_agent(model, backend=backend, middleware=middleware)
    result = asyncio.run(agent.ainvoke(GO)) if mode == "ainvoke" else agent.invoke(GO)
    answer, page = [m for m in result["messages"] if m.type == "tool"]
    assert answer.status == "success"
    assert answer.text.startswith("line 00001\nline 00002\n")
    assert f"saved at `{path}`" in answer.text
    assert "20,000 lines" in answer.text
    assert answer.text.endswith("line 19999\nline 20000\n[exit code 0]")
    assert len(answer.text) < 1_400
    saved = (tmp_path / "large_tool_results" / "execute_big.txt").read_text()
    assert saved == _numbered(20_000)  # the whole output, not the part shown
    assert "line 12345" in page.text and "line 12347" in page.text
    assert "line 12348" not in page.text


def test_no_output_says_so(mode: str, tmp_path: Path) -> None:
    message, _ = run(mode, LocalShellBackend(tmp_path), tool_call("execute", {"command": "true"}))
    assert message.text == "(no output)\n[exit code 0]"


def test_factory_backend(mode: str, tmp_path: Path) -> None:
    shell = LocalShellBackend(root_dir=tmp_path)
    seen: list[Any] = []

    def factory(runtime: Any) -> LocalShellBackend:
        seen.append(runtime.tool_call_id)
        return shell

    call = tool_call("execute", {"command": "echo via factory"}, id="call-f")
    message, _ = run(mode, shell, call, middleware_backend=factory)
    assert message.text == "via factory\n[exit code 0]"
    assert seen == ["call-f"]


def test_backend_without_a_shell_is_refused(mode: str, tmp_path: Path) -> None:
    files = FilesystemBackend(root_dir=tmp_path)
    message, _ = run(mode, files, tool_call("execute", {"command": "touch hacked"}))
    assert message.status == "error"
    assert "cannot run commands" in message.text
    assert not (tmp_path / "hacked").exists()


def test_empty_command_is_an_error(mode: str, tmp_path: Path) -> None:
    message, _ = run(mode, LocalShellBackend(tmp_path), tool_call("execute", {"command": " "}))
    assert message.status == "error"
    assert "empty" in message.text


def test_custom_prompt_and_description(tmp_path: Path) -> None:
    middleware = ExecuteMiddleware(
        backend=LocalShellBackend(tmp_path), system_prompt="", tool_description="run it"
    )
    assert middleware.section.text == ""
    (tool,) = middleware.tools
    assert (tool.name, tool.description) == ("execute", "run it")
    assert set(tool.args) == {"command", "timeout"}


COMMAND = "echo first; sleep 0.3; echo second"


def _chunks(events: list[Any]) -> list[dict[str, Any]]:
    return [e for e in events if isinstance(e, dict) and e.get("type") == EXECUTE_STREAM_EVENT]


def test_stream_custom_yields_output_chunks(tmp_path: Path) -> None:
    agent, _ = build(
        LocalShellBackend(tmp_path), tool_call("execute", {"command": COMMAND}, id="call-s")
    )
    chunks = _chunks(list(agent.stream(GO, stream_mode="custom")))
    assert len(chunks) >= 2
    assert {c["tool_call_id"] for c in chunks} == {"call-s"}
    assert "".join(c["chunk"] for c in chunks) == "first\nsecond\n"


def test_astream_custom_yields_output_chunks(tmp_path: Path) -> None:
    agent, _ = build(
        LocalShellBackend(tmp_path), tool_call("execute", {"command": COMMAND}, id="call-a")
    )

    async def collect() -> list[Any]:
        return [event async for event in agent.astream(GO, stream_mode="custom")]

    chunks = _chunks(asyncio.run(collect()))
    assert len(chunks) >= 2
    assert {c["tool_call_id"] for c in chunks} == {"call-a"}
    assert "".join(c["chunk"] for c in chunks) == "first\nsecond\n"
