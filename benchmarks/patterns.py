"""The multi-agent patterns' cost table, rebuilt: model calls and tokens per pattern.

Rebuilds the three scenarios of the performance comparison in LangChain's multi-agent docs
with `fathom.patterns` and scripted models:

* one-shot: "Buy coffee" in a new thread;
* repeated: "Buy coffee", then "Buy coffee again" in the same thread;
* multi-domain: "Compare Python, JavaScript, and Rust for web development", with a
  2,000-word document per language.

for four patterns: subagents (`create_supervisor`), handoffs (`StepMiddleware`), skills
(`SkillMiddleware`) and router (`create_router`). Every role is a `ScriptedModel` whose
policy decides from what it is sent (the visible tools, the system prompt and the messages
since the user's last message), so the call counts come out of the architectures rather
than out of the script. Fixture texts have the sizes of a word-count token model:
system prompts of 250 words, documents of 2,000 words, tool results of 10 words, expert
answers of 100 words and so on; whatever a pattern adds to a prompt is counted as sent.

Tokens are counted with that token model over what each model call was sent and
what it answered (`notes_tokens`): a system message is its word count, a user message 10
(or its word count when it carries more than 10 words, such as the synthesis input that
holds the experts' answers), a tool message its word count, an AI message its words plus
20 per tool call (a `findings` argument counts its words instead; a structured
classification counts 20 per entry). Wall time is measured with every model call taking
`LATENCY` seconds, and reported in units of that latency: the critical path.

Run it directly (`make bench` does): it prints the table and writes
`benchmarks/results/patterns.json`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver

from fathom.patterns.handoffs import Step, StepMiddleware, transfer_tool
from fathom.patterns.router import Expert, create_router
from fathom.patterns.skills import Skill, SkillMiddleware
from fathom.patterns.supervisor import Subagent, create_supervisor
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

PATTERNS = ("subagents", "handoffs", "skills", "router")
SCENARIOS = ("one_shot", "repeated", "multi_domain")
LANGUAGES = ("python", "javascript", "rust")

# The token model: sizes in words.
SYS, USER, TR, DOC, COFFEE_DOC, SMALL, EXP, FINAL = 250, 10, 10, 2000, 200, 20, 100, 1000
TOOL_CALL = 20

BUY_COFFEE = "Buy coffee"
BUY_AGAIN = "Buy coffee again"
COMPARE = "Compare Python, JavaScript, and Rust for web development"

# The reference figures for each pattern and scenario: calls from the tables of LangChain's
# multi-agent performance comparison ("7+" for handoffs is 7 in this design), tokens worked
# out call by call with the token model above.
REFERENCE: dict[str, dict[str, dict[str, int]]] = {
    "one_shot": {
        "subagents": {"calls": 4, "tokens": 1590},
        "handoffs": {"calls": 3, "tokens": 1330},
        "skills": {"calls": 3, "tokens": 1420},
        "router": {"calls": 3, "tokens": 1270},
    },
    "repeated": {
        "subagents": {"calls": 8, "tokens": 3320},
        "handoffs": {"calls": 5, "tokens": 2500},
        "skills": {"calls": 5, "tokens": 2650},
        "router": {"calls": 6, "tokens": 2540},
    },
    "multi_domain": {
        "subagents": {"calls": 5, "tokens": 9020},
        "handoffs": {"calls": 7, "tokens": 16530},
        "skills": {"calls": 3, "tokens": 15550},
        "router": {"calls": 5, "tokens": 8960},
    },
}

RESULTS_PATH = Path(__file__).resolve().parent / "results" / "patterns.json"
LATENCY = 0.1
"""Seconds each model call takes when wall time is measured."""

_VOCABULARY = [
    "the", "service", "handles", "requests", "with", "care", "and", "returns", "clear",
    "results", "for", "each", "team", "that", "builds", "reliable", "tools", "across",
]


def words(count: int, lead: str = "") -> str:
    """A text of exactly `count` words, starting with `lead`'s words when given."""
    head = lead.split()[:count]
    tail = [_VOCABULARY[i % len(_VOCABULARY)] for i in range(count - len(head))]
    return " ".join(head + tail)


# --------------------------------------------------------------------------- token model


def _word_count(text: str) -> int:
    return len(text.split())


def _call_cost(call: dict[str, Any]) -> int:
    args = call.get("args") or {}
    if isinstance(args.get("classifications"), list):
        return TOOL_CALL * len(args["classifications"])
    if isinstance(args.get("findings"), str):
        return _word_count(args["findings"])
    return TOOL_CALL


def notes_tokens(message: BaseMessage) -> int:
    """Tokens of one message under the token model (see the module docstring)."""
    if isinstance(message, SystemMessage | ToolMessage):
        return _word_count(message.text)
    if isinstance(message, HumanMessage):
        return max(USER, _word_count(message.text))
    if isinstance(message, AIMessage):
        return _word_count(message.text) + sum(_call_cost(c) for c in message.tool_calls)
    return _word_count(message.text)


@dataclass
class Measure:
    """What one pattern cost in one scenario."""

    calls: int
    tokens: int
    wall_latencies: float


def measure(models: Iterable[ScriptedModel], seconds: float, latency: float) -> Measure:
    """Calls and token-model tokens recorded by `models`, and the wall time in latencies."""
    calls = tokens = 0
    for model in models:
        for request in model.requests:
            calls += 1
            tokens += sum(notes_tokens(m) for m in request.messages)
            tokens += notes_tokens(request.response)
    return Measure(calls, tokens, round(seconds / latency, 2) if latency else 0.0)


# --------------------------------------------------------------------------- policies


def _results(request: ScriptRequest, name: str | None = None) -> list[ToolMessage]:
    return [
        m for m in request.turn_messages
        if isinstance(m, ToolMessage) and (name is None or m.name == name)
    ]


def _scripted(policy: Callable[[ScriptRequest], AIMessage | str], latency: float) -> ScriptedModel:
    return ScriptedModel(policy=policy, latency=latency)


def coffee_worker(request: ScriptRequest) -> AIMessage | str:
    """A coffee subagent or expert: buy, then confirm."""
    if not _results(request, "buy_coffee"):
        return ai("", tool_call("buy_coffee", {}))
    return words(SMALL, "Your coffee is ordered:")


@tool
def buy_coffee() -> str:
    """Order one coffee for the user."""
    return words(TR, "Coffee ordered: order C-001, one medium latte, ready soon")


# --------------------------------------------------------------------------- coffee scenarios

COFFEE_SYSTEM = words(SYS + COFFEE_DOC, "You are the coffee specialist. Coffee manual:")
BASE_SYSTEM = words(SYS, "You are a helpful assistant for the user.")


@dataclass
class Run:
    """A pattern ready to run: its turns and the models whose calls count."""

    turn: Callable[[str], Any]
    models: list[ScriptedModel]


def subagents_coffee(latency: float) -> Run:
    """Supervisor with the coffee agent as a tool (subagents)."""
    def supervisor_policy(request: ScriptRequest) -> AIMessage | str:
        if not _results(request):
            return ai("", tool_call("coffee_agent", {"request": "Buy one coffee for the user."}))
        return words(SMALL, "Done: your coffee is ordered.")

    worker = _scripted(coffee_worker, latency)
    supervisor = _scripted(supervisor_policy, latency)
    coffee = create_agent(worker, tools=[buy_coffee], system_prompt=COFFEE_SYSTEM, name="coffee")
    agent = create_supervisor(
        supervisor,
        [Subagent("coffee_agent", "Orders coffee for the user.", coffee)],
        system_prompt=BASE_SYSTEM,
        checkpointer=InMemorySaver(),
    )
    return Run(_agent_turns(agent), [supervisor, worker])


def handoffs_coffee(latency: float) -> Run:
    """One agent whose step moves from triage to coffee (handoffs)."""
    def policy(request: ScriptRequest) -> AIMessage | str:
        if "transfer_to_coffee" in request.tool_names:
            return ai("", tool_call("transfer_to_coffee", {}))
        return coffee_worker(request)

    model = _scripted(policy, latency)
    steps = {
        "triage": Step(BASE_SYSTEM, tools=[transfer_tool(
            "coffee", description="Hand the conversation to the coffee specialist.",
            message=words(TR, "Transferred to the coffee specialist step."))]),
        "coffee": Step(COFFEE_SYSTEM, tools=[buy_coffee]),
    }
    agent = create_agent(model, middleware=[StepMiddleware(steps)],
                         checkpointer=InMemorySaver(), name="handoffs")
    return Run(_agent_turns(agent), [model])


def _skill_agent(skills: Sequence[Skill], tools: Sequence[BaseTool],
                 policy: Callable[[ScriptRequest], AIMessage | str], latency: float) -> Run:
    """One agent with `SkillMiddleware`; its catalog block is counted as sent."""
    model = _scripted(policy, latency)
    middleware = SkillMiddleware(skills)
    agent = create_agent(model, tools=list(tools), system_prompt=BASE_SYSTEM,
                         middleware=[middleware], checkpointer=InMemorySaver(), name="skills")
    return Run(_agent_turns(agent), [model])


def _loaded(request: ScriptRequest) -> set[str]:
    return {
        m.text.split("\n", 1)[0].removeprefix("Loaded skill: ").strip()
        for m in request.messages
        if isinstance(m, ToolMessage) and m.text.startswith("Loaded skill: ")
    }


def skills_coffee(latency: float) -> Run:
    """One agent that loads the coffee skill on demand (skills)."""
    def policy(request: ScriptRequest) -> AIMessage | str:
        if "coffee" not in _loaded(request):
            return ai("", tool_call("load_skill", {"skill_name": "coffee"}))
        return coffee_worker(request)

    skill = Skill(name="coffee", description="How to order coffee for the user.",
                  content=words(COFFEE_DOC, "Coffee manual:"))
    return _skill_agent([skill], [buy_coffee], policy, latency)


def _classifier(request: ScriptRequest, query: str) -> AIMessage:
    schema = request.tool_names[0]
    sources = [lang for lang in LANGUAGES if lang in query.lower()] or ["coffee"]
    entries = [{"source": s, "query": f"{s.title()} for web development" if s != "coffee"
                else query} for s in sources]
    return ai("", tool_call(schema, {"classifications": entries}))


def router_coffee(latency: float) -> Run:
    """A classifier routing to the coffee expert; one result is passed through (router)."""
    def classify(request: ScriptRequest) -> AIMessage:
        return _classifier(request, request.last_human_text)

    classifier, worker = _scripted(classify, latency), _scripted(coffee_worker, latency)
    coffee = create_agent(worker, tools=[buy_coffee], system_prompt=COFFEE_SYSTEM, name="coffee")
    workflow = create_router(
        classifier, [Expert("coffee", "Orders coffee.", coffee)],
        routing_prompt=words(SYS, "Route the request to the experts that can handle it."),
    )

    async def turn(text: str) -> Any:
        return await workflow.ainvoke({"query": text})

    return Run(turn, [classifier, worker])


def _agent_turns(agent: Any) -> Callable[[str], Any]:
    config = {"configurable": {"thread_id": "bench"}, "recursion_limit": 60}

    async def turn(text: str) -> Any:
        return await agent.ainvoke({"messages": [HumanMessage(text)]}, config)

    return turn


# --------------------------------------------------------------------------- multi-domain


def _doc(lang: str) -> str:
    return words(DOC, f"{lang.title()} for web development documentation:")


def _language_system(lang: str) -> str:
    return words(SYS + DOC, f"You are the {lang.title()} expert. {_doc(lang)}")


def _expert_policy(request: ScriptRequest) -> str:
    lang = next(lang for lang in LANGUAGES if f"the {lang.title()} expert" in
                (request.system_prompt or ""))
    return words(EXP, f"{lang.title()} for the web:")


FINAL_TEXT = words(FINAL, "Comparison of Python, JavaScript and Rust for web development:")


def subagents_compare(latency: float) -> Run:
    """A supervisor that sends one `task` per language in one message, then synthesises."""
    def supervisor_policy(request: ScriptRequest) -> AIMessage | str:
        if not _results(request):
            return ai("", *(tool_call("task", {"agent_name": lang, "description":
                                               f"Assess {lang.title()} for web development."})
                            for lang in LANGUAGES))
        return FINAL_TEXT

    supervisor = _scripted(supervisor_policy, latency)
    expert = _scripted(_expert_policy, latency)
    agents = [
        Subagent(lang, f"Knows {lang.title()} for the web.",
                 create_agent(expert, system_prompt=_language_system(lang), name=lang))
        for lang in LANGUAGES
    ]
    agent = create_supervisor(supervisor, agents, mode="task", system_prompt=BASE_SYSTEM,
                              checkpointer=InMemorySaver())
    return Run(_agent_turns(agent), [supervisor, expert])


def router_compare(latency: float) -> Run:
    """A classifier fanning out to three language experts, then one synthesis call."""
    def policy(request: ScriptRequest) -> AIMessage | str:
        if request.tool_names:
            return _classifier(request, request.last_human_text)
        return FINAL_TEXT  # the synthesizer

    router_model, expert = _scripted(policy, latency), _scripted(_expert_policy, latency)
    experts = [
        Expert(lang, f"Knows {lang.title()} for the web.",
               create_agent(expert, system_prompt=_language_system(lang), name=lang))
        for lang in LANGUAGES
    ]
    workflow = create_router(
        router_model, experts,
        routing_prompt=words(SYS, "Route the request to the experts that can handle it."),
        synthesis_prompt=words(SYS - 8, "Merge the experts' answers.") + ' Question: "{query}"',
    )

    async def turn(text: str) -> Any:
        return await workflow.ainvoke({"query": text})

    return Run(turn, [router_model, expert])


@tool
def note_findings(language: str, findings: str) -> str:
    """Record your findings about one language before moving on."""
    return words(TR, f"Findings about {language} recorded.")


def skills_compare(latency: float) -> Run:
    """One agent: loads the three language skills, notes findings, answers."""
    def policy(request: ScriptRequest) -> AIMessage | str:
        missing = [lang for lang in LANGUAGES if lang not in _loaded(request)]
        if missing:
            return ai("", *(tool_call("load_skill", {"skill_name": lang}) for lang in missing))
        if not _results(request, "note_findings"):
            return ai("", *(tool_call("note_findings", {
                "language": lang, "findings": words(EXP, f"{lang.title()}:")})
                for lang in LANGUAGES))
        return FINAL_TEXT

    skills = [Skill(name=lang, description=words(95, f"{lang.title()} for web development:"),
                    content=_doc(lang)) for lang in LANGUAGES]
    return _skill_agent(skills, [note_findings], policy, latency)


def handoffs_compare(latency: float) -> Run:
    """One agent moving through a step per language, serially."""
    def policy(request: ScriptRequest) -> AIMessage | str:
        if "transfer_to_python" in request.tool_names:
            return ai("", tool_call("transfer_to_python", {}))
        lang = next(lang for lang in LANGUAGES
                    if f"the {lang.title()} expert" in (request.system_prompt or ""))
        noted = [m for m in _results(request, "note_findings") if lang in m.text.lower()]
        if not noted:
            return ai("", tool_call("note_findings", {
                "language": lang, "findings": words(EXP, f"{lang.title()}:")}))
        following = [name for name in request.tool_names if name.startswith("transfer_to_")]
        if following:
            return ai("", tool_call(following[0], {}))
        return FINAL_TEXT

    model = _scripted(policy, latency)

    def transfer(lang: str) -> BaseTool:
        return transfer_tool(lang, description=f"Move on to {lang.title()}.",
                             message=words(TR, f"Now in the {lang.title()} step."))

    steps = {"triage": Step(BASE_SYSTEM, tools=[transfer("python")])}
    for position, lang in enumerate(LANGUAGES):
        tools = [note_findings]
        if position + 1 < len(LANGUAGES):
            tools.append(transfer(LANGUAGES[position + 1]))
        steps[lang] = Step(_language_system(lang).replace("{", "{{").replace("}", "}}"),
                           tools=tools)
    agent = create_agent(model, middleware=[StepMiddleware(steps)],
                         checkpointer=InMemorySaver(), name="handoffs")
    return Run(_agent_turns(agent), [model])


BUILDERS: dict[str, dict[str, Callable[[float], Run]]] = {
    "coffee": {"subagents": subagents_coffee, "handoffs": handoffs_coffee,
               "skills": skills_coffee, "router": router_coffee},
    "compare": {"subagents": subagents_compare, "handoffs": handoffs_compare,
                "skills": skills_compare, "router": router_compare},
}

TURNS = {"one_shot": ("coffee", [BUY_COFFEE]), "repeated": ("coffee", [BUY_COFFEE, BUY_AGAIN]),
         "multi_domain": ("compare", [COMPARE])}


def run_scenario(scenario: str, pattern: str, latency: float = 0.0) -> Measure:
    """Build `pattern` afresh, play `scenario`'s turns on one thread, and measure it."""
    family, turns = TURNS[scenario]
    run = BUILDERS[family][pattern](latency)

    async def play() -> float:
        started = time.perf_counter()
        for text in turns:
            await run.turn(text)
        return time.perf_counter() - started

    seconds = asyncio.run(play())
    return measure(run.models, seconds, latency)


def run_all(latency: float = LATENCY) -> dict[str, dict[str, dict[str, Any]]]:
    """Every scenario for every pattern: calls, tokens and wall time in latencies."""
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for scenario in SCENARIOS:
        results[scenario] = {}
        for pattern in PATTERNS:
            measured = run_scenario(scenario, pattern, latency)
            results[scenario][pattern] = {
                "calls": measured.calls,
                "tokens": measured.tokens,
                "wall_latencies": measured.wall_latencies,
            }
    return results


def table_rows(results: dict[str, dict[str, dict[str, Any]]]) -> list[list[str]]:
    """Rows of the printed table: measured next to the reference figures."""
    rows = []
    for scenario in SCENARIOS:
        for pattern in PATTERNS:
            got, ref = results[scenario][pattern], REFERENCE[scenario][pattern]
            rows.append([
                scenario.replace("_", "-"), pattern, str(got["calls"]), str(ref["calls"]),
                f"{got['tokens']:,}", f"{ref['tokens']:,}",
                f"{got['tokens'] / ref['tokens']:.2f}", f"{got['wall_latencies']:.1f}",
            ])
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    """Run the scenarios, print the table, write the JSON file."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=LATENCY)
    parser.add_argument("--out", type=Path, default=RESULTS_PATH)
    args = parser.parse_args(argv)
    results = run_all(args.latency)
    from _harness import print_table

    print_table(
        "Multi-agent patterns: model calls and tokens (word-count token model)",
        ["scenario", "pattern", "calls", "ref", "tokens", "model", "ratio", "wall/L"],
        table_rows(results),
        footer=(f"ref: call counts of LangChain's multi-agent docs; model: the token model; "
                f"wall/L: wall time with each model call taking L = {args.latency:g} s"),
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    mismatched = [
        f"{s}/{p}" for s in SCENARIOS for p in PATTERNS
        if results[s][p]["calls"] != REFERENCE[s][p]["calls"]
    ]
    if mismatched:
        print("call counts differ from the reference: " + ", ".join(mismatched), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
