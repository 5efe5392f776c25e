"""The prompt-cache prefix reuse rate: exact figures on hand-built requests, and live on a run."""

from __future__ import annotations

import itertools
import json
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from fathom import create_deep_agent
from fathom.cache_metrics import (
    AgentPrefix,
    PrefixRecorder,
    prefix_reuse_rate,
    prefix_reuse_rates,
    prefix_reuse_summary,
    request_pieces,
)
from fathom.testing import ScriptedModel, ai, tool_call

TOOLS = [{"type": "function", "function": {"name": "lookup", "description": "Look up.",
                                           "parameters": {"type": "object", "properties": {}}}}]


def _canonical(system: str, messages: list[dict[str, Any]]) -> str:
    """The canonical JSON written out by hand: system, tools, then messages."""
    return json.dumps([{"system": system}, {"tools": TOOLS}, {"messages": messages}],
                      sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _shared(a: str, b: str) -> str:
    """The common prefix of `a` and `b`, character by character (the test's own oracle)."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def _human(text: str) -> dict[str, Any]:
    return {"type": "human", "content": text, "tool_calls": [], "tool_call_id": None}


def _joined(system: str, messages: list[BaseMessage]) -> str:
    return "".join(request_pieces([SystemMessage(system), *messages], TOOLS))


def test_the_pieces_join_to_the_canonical_json() -> None:
    messages: list[BaseMessage] = [
        HumanMessage("hi"),
        AIMessage("", tool_calls=[{"name": "lookup", "args": {"q": 1}, "id": "c1"}]),
        ToolMessage("found", tool_call_id="c1"),
    ]
    expected = _canonical("Be brief.", [
        _human("hi"),
        {"type": "ai", "content": "", "tool_calls": [{"name": "lookup", "args": {"q": 1},
                                                       "id": "c1"}], "tool_call_id": None},
        {"type": "tool", "content": "found", "tool_calls": [], "tool_call_id": "c1"},
    ])
    assert _joined("Be brief.", messages) == expected


def test_an_append_only_sequence_repeats_all_of_each_previous_request() -> None:
    history: list[BaseMessage] = [HumanMessage("one")]
    requests = []
    for k in range(4):
        requests.append(request_pieces([SystemMessage("S"), *history], TOOLS))
        history = [*history, AIMessage(f"answer {k}"), HumanMessage(f"next {k}")]
    assert prefix_reuse_rates(requests) == [1.0, 1.0, 1.0]


def test_a_changed_system_prompt_keeps_only_the_characters_before_the_change() -> None:
    earlier = _canonical("You are agent A; be brief.", [_human("hello")])
    later = _canonical("You are agent B; be brief.", [_human("hello"), _human("more")])
    # `[{"system":"You are agent ` (27 characters) is all they share
    assert _shared(earlier, later) == '[{"system":"You are agent '
    expected = len('[{"system":"You are agent ') / (len(earlier) - len("]}]"))
    assert prefix_reuse_rate(earlier, later) == expected
    assert expected < 0.15
    # the same requests in pieces give the same figure
    pieces = [request_pieces([SystemMessage(s), *m], TOOLS) for s, m in (
        ("You are agent A; be brief.", [HumanMessage("hello")]),
        ("You are agent B; be brief.", [HumanMessage("hello"), HumanMessage("more")]))]
    assert prefix_reuse_rates(pieces) == [expected]


def test_a_rewritten_message_keeps_the_share_before_it() -> None:
    first = [HumanMessage("question"), AIMessage("a long first answer")]
    second = [HumanMessage("question"), AIMessage("a SHORT first answer"), HumanMessage("q2")]
    earlier, later = _joined("S", first), _joined("S", second)
    shared = len(_shared(earlier, later))
    assert earlier[shared:].startswith("long")
    assert prefix_reuse_rate(earlier, later) == shared / (len(earlier) - 3)


def test_the_recorder_measures_each_agent_of_a_run_as_its_requests_show() -> None:
    main = ScriptedModel(replies=[
        ai("", tool_call("write_todos", {"todos": [{"content": "look", "status": "pending"}]})),
        ai("", tool_call("task", {"description": "find", "subagent_type": "researcher"})),
        ai("", tool_call("ls", {"path": "/"})),
        "done",
    ])
    researcher = ScriptedModel(replies=[ai("", tool_call("ls", {"path": "/"})), "facts"])
    agent = create_deep_agent(main, name="main", subagents=[{
        "name": "researcher", "description": "finds", "system_prompt": "Research.",
        "model": researcher}])
    recorder = PrefixRecorder()
    agent.invoke({"messages": [("user", "go")]}, {"callbacks": [recorder]})
    figures = recorder.agents()
    assert list(figures) == ["main", "researcher"]
    for name, model in (("main", main), ("researcher", researcher)):
        canonical = [r.canonical_json() for r in model.requests]
        assert figures[name].rates == prefix_reuse_rates(canonical), name
        assert figures[name].requests == len(model.requests)
        assert figures[name].input_chars == sum(len(c) for c in canonical[1:])
        assert figures[name].prefix_chars == sum(
            len(_shared(a, b)) for a, b in itertools.pairwise(canonical))
    assert figures["main"].mean is not None and figures["main"].mean > 0.9
    summary = prefix_reuse_summary(recorder)
    assert "main" in summary and "researcher" in summary
    main_line = next(line for line in summary.splitlines() if line.startswith("main"))
    assert f"{figures['main'].mean:.1%}" in main_line


def test_the_summary_says_when_there_is_nothing_to_compare_yet() -> None:
    assert "(no model requests yet)" in prefix_reuse_summary(PrefixRecorder())
    one = prefix_reuse_summary({"solo": AgentPrefix(requests=1)})
    assert "solo" in one and "-" in one.splitlines()[-1]


def test_the_recorder_measures_a_rewritten_request_as_the_recorded_figures_do() -> None:
    from uuid import uuid4

    history: list[BaseMessage] = [HumanMessage("question"), AIMessage("a long first answer")]
    requests = [
        [SystemMessage("You are agent A."), *history],
        [SystemMessage("You are agent A."), *history, HumanMessage("more")],  # extends it
        [SystemMessage("You are agent B."), *history, HumanMessage("more")],  # new system prompt
        [SystemMessage("You are agent B."), HumanMessage("question"), AIMessage("short")],
    ]
    recorder = PrefixRecorder()
    for request in requests:
        recorder.on_chat_model_start({}, [request], run_id=uuid4(),
                                     metadata={"lc_agent_name": "main"},
                                     invocation_params={"tools": TOOLS})
    canonical = ["".join(request_pieces(r, TOOLS)) for r in requests]
    figures = recorder.agents()["main"]
    assert figures.rates == prefix_reuse_rates(canonical)
    assert figures.rates[0] == 1.0 and figures.rates[1] < 0.1 and figures.rates[2] < 1.0
    assert figures.input_chars == sum(len(c) for c in canonical[1:])


def test_the_summary_reads_what_the_server_recorded_in_thread_metadata() -> None:
    metadata = {"main": {"requests": 5, "pairs": 3, "mean": 0.75, "min": 0.25,
                         "cached_share": 0.5, "prefix_chars": 4000}}
    line = prefix_reuse_summary(metadata).splitlines()[-1]
    assert line.split() == ["main", "5", "75.0%", "25.0%", "50.0%", "1,000"]


def test_a_request_s_head_follows_its_tools_even_after_the_caller_changes_them() -> None:
    """Heads are remembered between requests; a changed tool list renders anew."""
    tools: list[dict[str, Any]] = [{"name": "lookup", "parameters": {"type": "object"}}]
    first = "".join(request_pieces([SystemMessage("S"), HumanMessage("hi")], tools))
    tools[0]["name"] = "search"  # the same list object, changed in place
    second = "".join(request_pieces([SystemMessage("S"), HumanMessage("hi")], tools))
    assert '"lookup"' in first and '"search"' not in first
    assert '"search"' in second and '"lookup"' not in second
    assert json.loads(second)[1] == {"tools": tools}


def test_the_old_sticky_names_are_aliases_of_the_prefix_reuse_functions() -> None:
    import fathom.cache_metrics as metrics

    assert metrics.sticky_rate is prefix_reuse_rate
    assert metrics.sticky_rates is prefix_reuse_rates
    assert metrics.sticky_summary is prefix_reuse_summary
    earlier, later = "abcdef]}]", "abcxyz]}]"
    assert metrics.sticky_rate(earlier, later) == prefix_reuse_rate(earlier, later) == 0.5
