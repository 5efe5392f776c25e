"""`CodeInterpreterMiddleware` takes the reference's (`langchain-quickjs`) keywords with their
meaning: `subagents=True/False`, `mode`, `timeout`, `memory_limit`, `max_ptc_calls`,
`max_result_chars`, `max_subagent_concurrency`, `capture_console`, `tool_name`,
`max_snapshot_bytes` and `snapshot_signing_key`."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from tests.middleware.code_interpreter.support import echo_model, user

from fathom import create_deep_agent
from fathom.middleware.code_interpreter import CodeInterpreterMiddleware
from fathom.middleware.code_interpreter.session import SESSION_KEY, seal, unseal
from fathom.testing import ScriptedModel, ai, tool_call

WORKER = {"name": "worker", "description": "does one item", "system_prompt": "work"}
TASK = "await task('item', 'worker')"


def _run_codes(codes: list[str], middleware: CodeInterpreterMiddleware, *, name: str = "eval",
               subagents: bool = True, **options):
    """An agent (the interpreter given as plain middleware, as reference code passes it)
    whose model runs each of `codes` with the tool `name`, then stops."""
    main = ScriptedModel(
        replies=[ai("", tool_call(name, {"code": code}, id=f"c{i}")) for i, code in
                 enumerate(codes)],
        policy=lambda request: "done",
    )
    specs = [{**WORKER, "model": echo_model()}] if subagents else []
    graph = create_deep_agent(main, subagents=specs, general_purpose_subagent=False,
                              middleware=[middleware], **options)
    return graph, main


def _answers(result, name: str = "eval") -> list[str]:
    return [m.text for m in result["messages"] if m.type == "tool" and m.name == name]


async def test_subagents_true_finds_the_agents_own_task_tool_and_false_has_none():
    graph, main = _run_codes([TASK], CodeInterpreterMiddleware())  # the default: True
    assert _answers(await graph.ainvoke(user())) == ["done: item"]
    assert "await task(...)" in (main.requests[0].system_prompt or "")

    graph, main = _run_codes([TASK], CodeInterpreterMiddleware(subagents=False))
    (answer,) = _answers(await graph.ainvoke(user()))
    assert answer.startswith("Error: ValueError") and "worker" in answer
    assert "await task(...)" not in (main.requests[0].system_prompt or "")

    # True on an agent without a task tool: no subagents, and no prompt about them
    graph, main = _run_codes(["1 + 1"], CodeInterpreterMiddleware(subagents=True),
                             subagents=False)
    assert _answers(await graph.ainvoke(user())) == ["2"]
    assert "await task(...)" not in (main.requests[0].system_prompt or "")


def test_the_limit_keywords_set_the_limits_fields():
    middleware = CodeInterpreterMiddleware(
        timeout=2.5, memory_limit=32 * 1024 * 1024, max_ptc_calls=3, max_result_chars=500,
        max_subagent_concurrency=4, limits={"max_recursion_depth": 50, "timeout_s": 9})
    limits = middleware.limits
    assert (limits.timeout_s, limits.max_memory_bytes, limits.max_host_calls) == (
        2.5, 32 * 1024 * 1024, 3)
    assert (limits.max_result_chars, limits.max_concurrency) == (500, 4)
    assert limits.max_recursion_depth == 50  # what no keyword names comes from `limits`


async def test_max_ptc_calls_bounds_the_task_calls_of_one_eval():
    code = "await task('a', 'worker')\nawait task('b', 'worker')"
    graph, _ = _run_codes([code], CodeInterpreterMiddleware(max_ptc_calls=1))
    (answer,) = _answers(await graph.ainvoke(user()))
    assert "HostCallLimitError" in answer and "more than 1" in answer


def test_max_ptc_calls_none_and_conflicting_modes_are_refused_with_the_fix():
    with pytest.raises(ValueError, match=r"max_ptc_calls=None .* Give a number"):
        CodeInterpreterMiddleware(max_ptc_calls=None)
    with pytest.raises(ValueError, match="disagree"):
        CodeInterpreterMiddleware(persistence="thread", mode="call")
    with pytest.raises(TypeError, match="subagents must be"):
        CodeInterpreterMiddleware(subagents="worker")  # type: ignore[arg-type]
    assert CodeInterpreterMiddleware(mode="call").persistence == "call"


async def test_mode_is_the_persistence_mode():
    define, use = "x = 41\n'set'", "try:\n    r = x + 1\nexcept NameError:\n    r = 'gone'\nr"
    for mode, second in (("thread", "42"), ("call", "gone")):
        graph, _ = _run_codes([define, use], CodeInterpreterMiddleware(mode=mode))
        assert _answers(await graph.ainvoke(user())) == ["set", second]


async def test_tool_name_capture_console_and_max_result_chars():
    code = "print('chatter')\n'x' * 400"
    graph, main = _run_codes([code], CodeInterpreterMiddleware(
        tool_name="py", capture_console=False, max_result_chars=100), name="py")
    (answer,) = _answers(await graph.ainvoke(user()), name="py")
    assert "py" in main.requests[0].tool_names and "eval" not in main.requests[0].tool_names
    assert "chatter" not in answer  # printed output is not returned
    assert answer.startswith("x" * 100) and "clipped" in answer


async def test_max_snapshot_bytes_drops_a_session_too_large_to_keep():
    define, use = "x = 41\n'set'", "try:\n    r = x + 1\nexcept NameError:\n    r = 'gone'\nr"
    graph, _ = _run_codes([define, use], CodeInterpreterMiddleware(max_snapshot_bytes=1))
    assert _answers(await graph.ainvoke(user())) == ["set", "gone"]


def test_seal_and_unseal():
    sealed = seal(b"dump", b"key")
    assert sealed is not None and sealed != b"dump"
    assert unseal(sealed, b"key") == b"dump"
    assert unseal(sealed, b"other key") is None
    assert unseal(sealed[:-1] + b"X", b"key") is None  # a changed dump
    assert unseal(b"dump", b"key") is None  # never signed
    assert seal(b"dump", None) == b"dump" and unseal(b"dump", None) == b"dump"


async def test_a_session_signed_with_another_key_is_discarded_not_loaded():
    saver, config = InMemorySaver(), {"configurable": {"thread_id": "t"}}
    define, use = "x = 41\n'set'", "try:\n    r = x + 1\nexcept NameError:\n    r = 'gone'\nr"
    first, _ = _run_codes([define], CodeInterpreterMiddleware(snapshot_signing_key="one"),
                          checkpointer=saver)
    await first.ainvoke(user(), config)
    stored = (await first.aget_state(config)).values[SESSION_KEY]
    assert unseal(stored, b"one") is not None  # signed in the checkpoint
    same, _ = _run_codes([use], CodeInterpreterMiddleware(snapshot_signing_key=b"one"),
                         checkpointer=saver)
    assert _answers(await same.ainvoke(user("again"), config))[-1] == "42"
    other, _ = _run_codes([use], CodeInterpreterMiddleware(snapshot_signing_key="two"),
                          checkpointer=saver)
    assert _answers(await other.ainvoke(user("later"), config))[-1] == "gone"
