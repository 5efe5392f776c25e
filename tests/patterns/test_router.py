"""The router pattern: classify, fan out with `Send`, collect with a reducer, synthesize.

Every model here is a `ScriptedModel` whose policy decides from what it is sent: the
classifier answers from the question and the schema offered, an expert from its own system
prompt and the question, the synthesizer from the results it is shown.
"""

from __future__ import annotations

import asyncio
import operator
import re
import subprocess
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any, TypedDict

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import InvalidUpdateError
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from fathom.patterns.router import (
    NO_RESULTS_ANSWER,
    Expert,
    RouterClassificationError,
    build_classification_schema,
    create_router,
    router_tool,
)
from fathom.testing import Rendezvous, ScriptedModel, ScriptRequest, ai, tool_call
from fathom.usage import AgentUsage

from .conftest import load_example

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "patterns" / "knowledge_base_router.py"

AUTH = "How do I authenticate API requests?"
SOURCES = ("github", "notion", "slack")

# --------------------------------------------------------------------------- policies

# question -> the classifier's choice of (source, sub-question)
ROUTES: dict[str, list[tuple[str, str]]] = {
    AUTH: [("github", "auth middleware code?"), ("notion", "API auth guide?")],
    "What is the weather on Mars?": [],
    "What did the team decide about deploys?": [("slack", "deploy decision thread?")],
    "Compare everything": [
        ("github", "code view?"),
        ("notion", "docs view?"),
        ("slack", "team view?"),
    ],
    "Ask in reverse": [("notion", "n?"), ("slack", "s?"), ("github", "g?")],
}


def classify_policy(request: ScriptRequest) -> AIMessage:
    assert request.tool_names == ["ClassificationResult"], request.tool_names
    chosen = ROUTES[request.last_human_text]
    return ai(
        "",
        tool_call(
            "ClassificationResult",
            {"classifications": [{"source": s, "query": q} for s, q in chosen]},
        ),
    )


def expert_policy(request: ScriptRequest) -> str:
    """Answer directly, as the expert named in the system prompt."""
    match = re.search(r"You are the (\w+) expert", request.system_prompt or "")
    assert match, request.system_prompt
    return f"{match.group(1)} says: {request.last_human_text}"


def synth_policy(request: ScriptRequest) -> str:
    blocks = re.findall(r"^\*\*From (\w+):\*\*$", request.last_human_text, re.MULTILINE)
    return "merged " + "+".join(blocks)


def make_experts(
    latency: dict[str, float] | None = None,
) -> tuple[list[Expert], dict[str, ScriptedModel]]:
    models = {
        s: ScriptedModel(policy=expert_policy, latency=(latency or {}).get(s, 0.0))
        for s in SOURCES
    }
    experts = [
        Expert(
            s,
            f"Knows about {s} things.",
            create_agent(models[s], system_prompt=f"You are the {s} expert.", name=f"{s}_agent"),
        )
        for s in SOURCES
    ]
    return experts, models


def make_router(
    latency: dict[str, float] | None = None, **kwargs: Any
) -> tuple[Any, ScriptedModel, ScriptedModel, dict[str, ScriptedModel]]:
    classifier = ScriptedModel(policy=classify_policy)
    synthesizer = ScriptedModel(policy=synth_policy)
    experts, models = make_experts(latency)
    workflow = create_router(classifier, experts, synthesizer_model=synthesizer, **kwargs)
    return workflow, classifier, synthesizer, models


def task_events(workflow: Any, query: str, **config: Any) -> list[dict[str, Any]]:
    return list(workflow.stream({"query": query}, config or None, stream_mode="tasks"))


# --------------------------------------------------------------------------- TB-52 .. TB-57


def test_tb52_only_the_classified_experts_run() -> None:
    workflow, classifier, _, models = make_router()

    result = workflow.invoke({"query": AUTH})

    assert {c["source"] for c in result["classifications"]} == {"github", "notion"}
    assert [r["source"] for r in result["results"]] == ["github", "notion"]
    assert len(models["github"].requests) == 1
    assert len(models["notion"].requests) == 1
    assert models["slack"].requests == []
    # The classifier was shown the expert names and descriptions and the question only.
    (request,) = classifier.requests
    assert [type(m) for m in request.messages] == [SystemMessage, HumanMessage]
    assert "- slack: Knows about slack things." in (request.system_prompt or "")
    schema = request.tools[0]["function"]["parameters"]
    item = schema["properties"]["classifications"]["items"]
    assert item["properties"]["source"]["enum"] == list(SOURCES)


def test_tb53_each_send_carries_exactly_the_sub_question() -> None:
    workflow, _, _, models = make_router()

    started = [e for e in task_events(workflow, AUTH) if "input" in e]
    expert_inputs = {e["name"]: e["input"] for e in started if e["name"] in SOURCES}

    assert expert_inputs == {
        "github": {"query": "auth middleware code?"},
        "notion": {"query": "API auth guide?"},
    }
    # The expert agent gets one user message: the sub-question, not the original query.
    (request,) = models["github"].requests
    assert [m.text for m in request.messages[1:]] == ["auth middleware code?"]


def test_tb54_no_classification_means_no_expert_and_no_synthesis_call() -> None:
    workflow, classifier, synthesizer, models = make_router()

    result = workflow.invoke({"query": "What is the weather on Mars?"})

    assert result["classifications"] == []
    assert result["results"] == []
    assert result["final_answer"] == NO_RESULTS_ANSWER
    assert len(classifier.requests) == 1
    assert synthesizer.requests == []
    assert all(m.requests == [] for m in models.values())


def test_tb55_reducer_collects_every_branch_in_classification_order() -> None:
    # Completion order (github, slack, notion) differs from both the classification order
    # (notion, slack, github) and the alphabetical one.
    # Each expert finishes only once the one before it in that order did (events, not
    # sleeps: a loaded machine can start the three branches far apart).
    finished: list[str] = []
    done = {s: threading.Event() for s in SOURCES}
    after = {"github": None, "slack": "github", "notion": "slack"}

    def ordered(name: str) -> Any:
        def answer(query: str) -> str:
            before = after[name]
            if before is not None:
                assert done[before].wait(60), f"{before} never finished"  # bounds a hang only
            finished.append(name)
            done[name].set()
            return f"{name}: {query}"

        return answer

    experts = [Expert(s, f"{s} things", ordered(s)) for s in SOURCES]
    workflow = create_router(
        ScriptedModel(policy=classify_policy),
        experts,
        synthesizer_model=ScriptedModel(policy=synth_policy),
    )

    result = workflow.invoke({"query": "Ask in reverse"})

    assert finished == ["github", "slack", "notion"]
    assert [r["source"] for r in result["results"]] == ["notion", "slack", "github"]
    assert result["final_answer"] == "merged Notion+Slack+Github"


def test_tb55_without_a_reducer_parallel_writes_collide() -> None:
    class NoReducer(TypedDict, total=False):
        results: list[str]

    graph = StateGraph(NoReducer)
    graph.add_node("fan", lambda state: {})
    graph.add_node("worker", lambda payload: {"results": [payload["n"]]})
    graph.add_edge(START, "fan")
    graph.add_conditional_edges("fan", lambda state: [Send("worker", {"n": 1}),
                                                      Send("worker", {"n": 2})])
    graph.add_edge("worker", END)

    with pytest.raises(InvalidUpdateError, match="results"):
        graph.compile().invoke({})

    class WithReducer(TypedDict, total=False):
        results: Annotated[list[int], operator.add]

    fixed = StateGraph(WithReducer)
    fixed.add_node("fan", lambda state: {})
    fixed.add_node("worker", lambda payload: {"results": [payload["n"]]})
    fixed.add_edge(START, "fan")
    fixed.add_conditional_edges("fan", lambda state: [Send("worker", {"n": 1}),
                                                      Send("worker", {"n": 2})])
    fixed.add_edge("worker", END)
    assert fixed.compile().invoke({}) == {"results": [1, 2]}


def test_tb56_synthesis_runs_once_after_every_branch_with_the_original_query() -> None:
    workflow, _, synthesizer, _ = make_router(latency={"github": 0.1, "slack": 0.05})

    events = task_events(workflow, "Compare everything")

    names = [e["name"] for e in events if "input" in e]
    assert names.count("synthesize") == 1
    start = next(i for i, e in enumerate(events) if e["name"] == "synthesize")
    finished = [e["name"] for e in events[:start] if "result" in e]
    assert set(SOURCES) <= set(finished)
    (request,) = synthesizer.requests
    assert "Compare everything" in (request.system_prompt or "")
    assert request.messages[-1].text == (
        "**From Github:**\ngithub says: code view?\n\n"
        "**From Notion:**\nnotion says: docs view?\n\n"
        "**From Slack:**\nslack says: team view?"
    )
    assert events[-1]["result"] == {"final_answer": "merged Github+Notion+Slack"}


def test_tb57_three_experts_cost_one_plus_three_plus_one_calls() -> None:
    workflow, _, _, _ = make_router()
    usage = AgentUsage()

    workflow.invoke({"query": "Compare everything"}, {"callbacks": [usage]})

    calls = {name: t.calls for name, t in usage.totals().items()}
    # Expert agents were built with name="<source>_agent"; the router attributes their
    # calls to the expert's own name.
    assert calls == {"router": 1, "github": 1, "notion": 1, "slack": 1, "synthesizer": 1}
    assert usage.total().calls == 5
    assert usage.totals()["router"].input_tokens > 0


def test_single_domain_costs_three_calls_and_passes_the_answer_through() -> None:
    @tool
    def search_slack(query: str) -> str:
        """Search Slack."""
        return "deploys are frozen on Fridays"

    def slack_policy(request: ScriptRequest) -> AIMessage | str:
        if not request.tool_results:
            return ai("", tool_call("search_slack", {"query": request.last_human_text}))
        return f"Slack: {request.tool_results[0].text}"

    slack_model = ScriptedModel(policy=slack_policy)
    synthesizer = ScriptedModel(policy=synth_policy)
    experts, _ = make_experts()
    experts[2] = Expert(
        "slack", "Team talk.", create_agent(slack_model, tools=[search_slack], system_prompt="s")
    )
    workflow = create_router(
        ScriptedModel(policy=classify_policy), experts, synthesizer_model=synthesizer
    )
    usage = AgentUsage()

    result = workflow.invoke(
        {"query": "What did the team decide about deploys?"}, {"callbacks": [usage]}
    )

    assert result["final_answer"] == "Slack: deploys are frozen on Fridays"
    assert {n: t.calls for n, t in usage.totals().items()} == {"router": 1, "slack": 2}
    assert synthesizer.requests == []


def test_an_expert_without_an_answer_is_left_out_of_synthesis() -> None:
    experts = [
        Expert("github", "code", lambda q: "use JWT"),
        Expert("notion", "docs", lambda q: "   "),
        Expert("slack", "talk", lambda q: "unused"),
    ]
    synthesizer = ScriptedModel(policy=synth_policy)
    workflow = create_router(
        ScriptedModel(policy=classify_policy), experts, synthesizer_model=synthesizer
    )

    result = workflow.invoke({"query": AUTH})

    assert len(result["results"]) == 2
    assert result["final_answer"] == "use JWT"
    assert synthesizer.requests == []


# --------------------------------------------------------------------------- TB-58, TB-59


def test_tb58_stateless_workflow_classifies_every_time_and_keeps_nothing() -> None:
    workflow, classifier, _, _ = make_router()

    workflow.invoke({"query": AUTH})
    workflow.invoke({"query": "What did the team decide about deploys?"})

    assert workflow.checkpointer is None
    assert [r.messages[-1].text for r in classifier.requests] == [
        AUTH,
        "What did the team decide about deploys?",
    ]
    assert all(len(r.messages) == 2 for r in classifier.requests)


def test_results_start_empty_on_every_run_even_with_a_checkpointer() -> None:
    workflow, _, _, _ = make_router(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}

    workflow.invoke({"query": "Compare everything"}, config)
    second = workflow.invoke({"query": "What did the team decide about deploys?"}, config)

    assert [r["source"] for r in second["results"]] == ["slack"]
    assert second["final_answer"] == "slack says: deploy decision thread?"


def assistant_policy(request: ScriptRequest) -> AIMessage | str:
    """Search for every new user message; answer with the result and the turn number."""
    if isinstance(request.last_message, HumanMessage):
        return ai("", tool_call("search_knowledge_base", {"query": request.last_human_text}))
    turns = sum(isinstance(m, HumanMessage) for m in request.messages)
    return f"(turn {turns}) {request.last_message.text if request.last_message else ''}"


def test_tb58_the_tool_wrapper_gives_the_conversation_memory() -> None:
    workflow, classifier, _, _ = make_router()
    search = router_tool(workflow)
    assistant_model = ScriptedModel(policy=assistant_policy)
    assistant = create_agent(
        assistant_model, tools=[search], checkpointer=InMemorySaver(), name="assistant"
    )
    usage = AgentUsage()
    config: Any = {"configurable": {"thread_id": "user-123"}, "callbacks": [usage]}

    first = assistant.invoke({"messages": [HumanMessage(AUTH)]}, config)
    second = assistant.invoke(
        {"messages": [HumanMessage("What did the team decide about deploys?")]}, config
    )

    assert search.name == "search_knowledge_base"
    assert first["messages"][-1].text == "(turn 1) merged Github+Notion"
    assert second["messages"][-1].text == "(turn 2) slack says: deploy decision thread?"
    # Turn 2's first call saw turn 1 (4 messages) plus the new question.
    turn_two = assistant_model.requests[2]
    assert [m.text for m in turn_two.messages if isinstance(m, HumanMessage)] == [
        AUTH,
        "What did the team decide about deploys?",
    ]
    # The router classified once per turn and saw only the current question.
    assert [len(r.messages) for r in classifier.requests] == [2, 2]
    calls = {n: t.calls for n, t in usage.totals().items()}
    assert calls["assistant"] == 4
    assert calls["router"] == 2
    # Another thread starts with no memory.
    other = assistant.invoke(
        {"messages": [HumanMessage(AUTH)]}, {"configurable": {"thread_id": "other"}}
    )
    assert other["messages"][-1].text.startswith("(turn 1)")


async def test_router_tool_async_path() -> None:
    workflow, _, _, _ = make_router()
    search = router_tool(workflow, name="search_docs", description="Search the docs.")

    answer = await search.ainvoke({"query": AUTH})

    assert answer == "merged Github+Notion"
    assert search.description == "Search the docs."


def test_tb59_single_target_routing_runs_exactly_one_expert() -> None:
    def pick(request: ScriptRequest) -> AIMessage:
        assert request.tool_names == ["RouteDecision"]
        return ai("", tool_call("RouteDecision", {"source": "notion"}))

    experts, models = make_experts()
    synthesizer = ScriptedModel(policy=synth_policy)
    workflow = create_router(
        ScriptedModel(policy=pick), experts, synthesizer_model=synthesizer, mode="single"
    )

    events = task_events(workflow, AUTH)

    started = [e["name"] for e in events if "input" in e]
    assert started == ["classify", "notion", "synthesize"]
    assert len(models["notion"].requests) == 1
    assert models["github"].requests == models["slack"].requests == []
    assert synthesizer.requests == []
    # Command(goto=...) passes the original question on.
    assert models["notion"].requests[0].messages[-1].text == AUTH
    assert events[-1]["result"] == {"final_answer": f"notion says: {AUTH}"}


# --------------------------------------------------------------------------- concurrency

LATENCY = 0.01


@pytest.mark.parametrize("path", ["invoke", "ainvoke", "ainvoke-blocking-functions"])
async def test_experts_run_concurrently(path: str) -> None:
    # Each expert waits until all three are in flight at once: experts run one after the
    # other would break the rendezvous (a failed test) instead of merely being slow.
    meet = Rendezvous(len(SOURCES))
    if path == "ainvoke-blocking-functions":

        def blocking(name: str) -> Any:
            def answer(query: str) -> str:
                meet.arrive()
                return name

            return answer

        experts = [Expert(s, f"{s} things", blocking(s)) for s in SOURCES]
        workflow = create_router(
            ScriptedModel(policy=classify_policy),
            experts,
            synthesizer_model=ScriptedModel(policy=synth_policy),
        )
    else:
        workflow, _, _, models = make_router(latency=dict.fromkeys(SOURCES, LATENCY))
        for model in models.values():
            model.rendezvous = meet

    if path == "invoke":
        result = await asyncio.to_thread(workflow.invoke, {"query": "Compare everything"})
    else:
        result = await workflow.ainvoke({"query": "Compare everything"})

    assert len(result["results"]) == 3
    assert (meet.max_in_flight, meet.groups) == (3, 1)


async def test_async_function_experts_work_with_ainvoke_only() -> None:
    async def github(query: str) -> str:
        await asyncio.sleep(0)
        return f"async github: {query}"

    experts = [Expert("github", "code", github), Expert("notion", "docs", lambda q: "docs")]
    workflow = create_router(
        ScriptedModel(policy=classify_policy),
        experts,
        synthesizer_model=ScriptedModel(policy=synth_policy),
    )

    result = await workflow.ainvoke({"query": AUTH})
    assert result["results"][0] == {
        "source": "github",
        "result": "async github: auth middleware code?",
    }
    with pytest.raises(TypeError, match="async function; run the router with ainvoke"):
        workflow.invoke({"query": AUTH})


# --------------------------------------------------------------------------- bad input


def test_an_unknown_source_from_the_classifier_is_a_clear_error() -> None:
    def invent(request: ScriptRequest) -> AIMessage:
        return ai(
            "",
            tool_call(
                "ClassificationResult",
                {"classifications": [{"source": "jira", "query": "tickets?"}]},
            ),
        )

    experts, models = make_experts()
    workflow = create_router(ScriptedModel(policy=invent), experts)

    with pytest.raises(RouterClassificationError, match="one of: github, notion, slack") as err:
        workflow.invoke({"query": AUTH})
    assert "jira" in str(err.value)
    assert all(m.requests == [] for m in models.values())


def test_a_classifier_that_answers_in_prose_is_a_clear_error() -> None:
    experts, _ = make_experts()
    workflow = create_router(ScriptedModel(policy=lambda r: "ask github"), experts)

    with pytest.raises(RouterClassificationError, match="gave no ClassificationResult"):
        workflow.invoke({"query": AUTH})


def test_the_schema_limits_sources_to_the_expert_names() -> None:
    schema = build_classification_schema(["github", "notion"])

    ok = schema.model_validate({"classifications": [{"source": "notion", "query": "q"}]})
    assert ok.classifications[0].source == "notion"  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="github"):
        schema.model_validate({"classifications": [{"source": "slack", "query": "q"}]})


@pytest.mark.parametrize("query", [None, "", "   "])
def test_the_query_must_be_a_non_empty_string(query: Any) -> None:
    workflow, classifier, _, _ = make_router()

    with pytest.raises(ValueError, match="non-empty 'query'"):
        workflow.invoke({} if query is None else {"query": query})
    assert classifier.requests == []


def _good(name: str = "github") -> Expert:
    return Expert(name, "code", lambda q: q)


@pytest.mark.parametrize(
    ("build", "error", "message"),
    [
        (lambda: create_router(ScriptedModel(), []), ValueError, "at least one Expert"),
        (
            lambda: create_router(ScriptedModel(), [_good(), _good()]),
            ValueError,
            r"unique; repeated: \['github'\]",
        ),
        (lambda: create_router(ScriptedModel(), [("github", "code")]), TypeError, "experts"),
        (
            lambda: create_router(ScriptedModel(), [_good()], mode="fanout"),  # type: ignore[arg-type]
            ValueError,
            "mode must be",
        ),
        (
            lambda: create_router(ScriptedModel(), [_good()], synthesis_prompt="Merge."),
            ValueError,
            r"\{query\}",
        ),
        (lambda: Expert("synthesize", "x", print), ValueError, "taken by the router"),
        (lambda: Expert("query", "x", print), ValueError, "taken by the router"),
        (lambda: Expert("git hub", "x", print), ValueError, "letters, digits"),
        (lambda: Expert("github", " ", print), ValueError, "needs a description"),
        (lambda: Expert("github", "x", ScriptedModel()), TypeError, "bare model"),
        (lambda: Expert("github", "x", 42), TypeError, "expected a compiled agent"),  # type: ignore[arg-type]
        (lambda: router_tool("not a graph"), TypeError, "create_router returns"),  # type: ignore[arg-type]
    ],
)
def test_bad_configuration_fails_at_construction(build: Any, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        build()


def test_an_agent_expert_must_return_messages() -> None:
    from langchain_core.runnables import RunnableLambda

    experts = [Expert("github", "code", RunnableLambda(lambda state: "plain text"))]
    workflow = create_router(
        ScriptedModel(policy=lambda r: ai("", tool_call("ClassificationResult", {
            "classifications": [{"source": "github", "query": "q"}]}))),
        experts,
    )

    with pytest.raises(TypeError, match="without a 'messages' list"):
        workflow.invoke({"query": AUTH})


# --------------------------------------------------------------------------- the example


def _load_example() -> ModuleType:
    return load_example("knowledge_base_router")


def test_example_runs_as_a_script() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=100, cwd=ROOT
    )

    assert done.returncode == 0, done.stderr
    for line in [
        "Query: How do I authenticate API requests?",
        "  github: Which code, issues and PRs handle: authenticate API requests?",
        "  notion: What do our guides say about: authenticate API requests?",
        'To answer "How do I authenticate API requests?" (from GitHub and Notion):',
        "- PR #156 added JWT authentication, PR #178 updated OAuth scopes",
        "Model calls per role: github=2, notion=2, router=1, synthesizer=1",
        "Experts that ran: github, notion; never started: slack",
        'Assistant: Following up on your earlier question ("How do I authenticate API '
        'requests?"):',
        "Messages kept on thread user-123: 8",
    ]:
        assert line in done.stdout.splitlines(), (line, done.stdout)


def test_example_main_reports_what_happened(capsys: pytest.CaptureFixture[str]) -> None:
    outcome = _load_example().main()

    assert [c["source"] for c in outcome["classifications"]] == ["github", "notion"]
    assert "slack" not in outcome["calls"]
    assert outcome["calls"] == {"router": 1, "github": 2, "notion": 2, "synthesizer": 1}
    assert outcome["tools_called"] == [
        "search_code", "search_issues", "search_notion", "search_prs"
    ]
    assert "JWT" in outcome["final_answer"] and "OAuth2" in outcome["final_answer"]
    assert "#203" in outcome["final_answer"]
    assert outcome["answers"][0] == outcome["final_answer"]
    assert "Bearer tokens" in outcome["answers"][1]
    assert outcome["thread_messages"] == 8
    # Stateless router under a stateful assistant: it classified on both turns.
    assert outcome["turn_calls"]["router"] == 2
    assert outcome["turn_calls"]["assistant"] == 4
    assert "Messages kept on thread user-123: 8" in capsys.readouterr().out
