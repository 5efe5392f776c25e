"""The six dynamic-subagent patterns: one `eval` whose Python starts the subagents.

Each pattern is a function that builds a small deep agent with the code interpreter on,
runs it once, and returns a `PatternRun`: what the code returned and how many model
calls the parent and each subagent made. The models are `ScriptedModel`s, so the example
runs offline and deterministically: the parent's first call writes one `eval` (the
pattern's code, shown in `docs/dynamic-subagents.md`), its second reports the result;
each subagent answers from the text of its task.

    .venv/bin/python examples/dynamic_subagents/patterns.py            # all six
    .venv/bin/python examples/dynamic_subagents/patterns.py tournament # one

| pattern | what the code does |
|---|---|
| classify-and-act | a classifier labels each ticket (`response_schema`), a handler per label acts |
| fan-out-and-synthesize | one researcher per topic at once, then one writer over all findings |
| adversarial verification | a solver answers, a verifier attacks it, the solver retries |
| generate-and-filter | generators propose, code dedupes and filters, a scorer ranks the rest |
| tournament | single elimination: N−1 judge calls, a bye for the odd one out |
| loop-until-done | expand a frontier until nothing new comes back (stable dedupe key, round cap) |
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import HumanMessage, ToolMessage

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

__all__ = [
    "PATTERNS",
    "PatternRun",
    "adversarial_verification",
    "classify_and_act",
    "fan_out_and_synthesize",
    "generate_and_filter",
    "loop_until_done",
    "main",
    "run_pattern",
    "tournament",
]

Answer = Callable[[str], str]
"""How a scripted subagent answers: a function of its task text."""

PROMPT = "Run the pattern."


@dataclass
class PatternRun:
    """One pattern's run: the value the code returned and who made how many model calls."""

    name: str
    result: Any
    parent_calls: int
    subagent_calls: dict[str, int] = field(default_factory=dict)
    answer: str = ""

    @property
    def total_subagent_calls(self) -> int:
        """Model calls of all subagents together."""
        return sum(self.subagent_calls.values())


def _task_text(request: ScriptRequest) -> str:
    """The subagent's task: the first human message of its request."""
    for message in request.messages:
        if isinstance(message, HumanMessage):
            return str(message.text)
    return ""


def _subagent(name: str, description: str, answer: Answer) -> tuple[dict[str, Any], ScriptedModel]:
    """A subagent spec with its own scripted model, which answers `answer(task text)`."""
    model = ScriptedModel(policy=lambda request: answer(_task_text(request)))
    spec = {"name": name, "description": description, "model": model, "tools": [],
            "system_prompt": f"You are the {name}. Answer the task in one message."}
    return spec, model


def run_pattern(name: str, code: str, subagents: dict[str, tuple[str, Answer]]) -> PatternRun:
    """Run a parent that writes one `eval` with `code`, over scripted `subagents`.

    Args:
        name: The pattern's name (for the report).
        code: The Python the parent's model writes.
        subagents: name -> (description, answer function).
    """
    built = {n: _subagent(n, d, a) for n, (d, a) in subagents.items()}
    specs = [spec for spec, _ in built.values()]

    def parent(request: ScriptRequest) -> Any:
        results = [m for m in request.turn_messages if isinstance(m, ToolMessage)]
        if not results:
            return ai("", tool_call("eval", {"code": code}, id="eval_1"))
        return ai(f"Result: {results[-1].text}")

    model = ScriptedModel(policy=parent)
    agent = create_deep_agent(model, subagents=specs, general_purpose_subagent=False,
                              code_interpreter=True)
    out = asyncio.run(agent.ainvoke({"messages": [HumanMessage(PROMPT)]}))
    tool_result = next(m for m in reversed(out["messages"]) if isinstance(m, ToolMessage))
    if tool_result.status == "error":
        raise RuntimeError(f"{name}: the code failed: {tool_result.text}")
    return PatternRun(
        name=name, result=json.loads(tool_result.text), parent_calls=len(model.requests),
        subagent_calls={n: len(m.requests) for n, (_, m) in built.items()},
        answer=str(out["messages"][-1].text),
    )


def _after(text: str, marker: str) -> str:
    """The part of `text` after `marker`, up to the end of its line."""
    return text.split(marker, 1)[1].splitlines()[0].strip()


# --------------------------------------------------------------------------- 1


CLASSIFY_CODE = '''
import asyncio
tickets = [
    "I was charged twice for my subscription",
    "The export button crashes the app",
    "Can you add a dark mode?",
    "Refund my last invoice please",
]
schema = {"type": "object", "properties": {"label": {"enum": ["billing", "bug", "feature"]}},
          "required": ["label"]}
labels = await asyncio.gather(*(
    task(f"Classify this ticket: {t}", "classifier", response_schema=schema, label=f"classify {i}")
    for i, t in enumerate(tickets)))
handler = {"billing": "billing-agent", "bug": "bug-triager", "feature": "product-agent"}
actions = await asyncio.gather(*(
    task(f"Handle this ticket: {t}", handler[l["label"]])
    for t, l in zip(tickets, labels)))
[{"ticket": t, "label": l["label"], "action": a} for t, l, a in zip(tickets, labels, actions)]
'''


def _classify(text: str) -> str:
    ticket = _after(text, "Classify this ticket:").lower()
    label = ("billing" if re.search(r"charge|refund|invoice", ticket)
             else "bug" if re.search(r"crash|error|broken", ticket) else "feature")
    return json.dumps({"label": label})


def classify_and_act() -> PatternRun:
    """Label each ticket with a classifier, then send it to the handler for its label.

    4 tickets: 4 classifier calls and 4 handler calls (2 billing, 1 bug, 1 feature).
    """
    def handle(prefix: str) -> Answer:
        return lambda text: f"{prefix}: {_after(text, 'Handle this ticket:')}"

    return run_pattern("classify-and-act", CLASSIFY_CODE, {
        "classifier": ("Labels a support ticket billing, bug or feature.", _classify),
        "billing-agent": ("Resolves billing tickets.", handle("refund issued")),
        "bug-triager": ("Files bug reports.", handle("bug filed")),
        "product-agent": ("Logs feature requests.", handle("request logged")),
    })


# --------------------------------------------------------------------------- 2


FAN_OUT_CODE = '''
import asyncio
topics = ["checkpointing", "streaming", "interrupts", "subgraphs", "stores"]
findings = await asyncio.gather(*(
    task(f"Research: {t}", "researcher", label=t) for t in topics))
notes = "\\n".join(f"- {t}: {f}" for t, f in zip(topics, findings))
summary = await task(f"Synthesize these findings:\\n{notes}", "writer")
{"topics": len(topics), "summary": summary}
'''


def fan_out_and_synthesize() -> PatternRun:
    """Research 5 topics at once, then one writer combines the 5 findings.

    5 researcher calls, 1 writer call.
    """
    def research(text: str) -> str:
        return f"{_after(text, 'Research:')} is covered in the docs"

    def write(text: str) -> str:
        names = re.findall(r"^- (\w+):", text, re.MULTILINE)
        return f"{len(names)} findings: " + ", ".join(names)

    return run_pattern("fan-out-and-synthesize", FAN_OUT_CODE, {
        "researcher": ("Researches one topic.", research),
        "writer": ("Writes a summary of findings.", write),
    })


# --------------------------------------------------------------------------- 3


VERIFY_CODE = '''
import asyncio
problems = ["17 * 23", "12 * 12", "31 * 7"]
schema = {"type": "object", "properties": {"ok": {"type": "boolean"}, "flaw": {"type": "string"}},
          "required": ["ok"]}

async def solve(problem):
    feedback = ""
    for attempt in range(3):
        answer = await task(f"Solve: {problem}{feedback}", "solver")
        verdict = await task(f"Find the flaw. Problem: {problem}\\nAnswer: {answer}",
                             "verifier", response_schema=schema)
        if verdict["ok"]:
            return {"problem": problem, "answer": answer, "attempts": attempt + 1}
        feedback = f"\\nA previous answer was wrong: {verdict['flaw']}"
    return {"problem": problem, "answer": None, "attempts": 3}

await asyncio.gather(*(solve(p) for p in problems))
'''


def _product(problem: str) -> int:
    left, right = (int(x) for x in problem.split("*"))
    return left * right


def _solve(text: str) -> str:
    problem = _after(text, "Solve:")
    value = _product(problem)
    # The solver slips on 17 * 23 the first time; the verifier's feedback fixes it.
    if problem.startswith("17") and "previous answer was wrong" not in text:
        value += 10
    return str(value)


def _verify(text: str) -> str:
    problem, answer = _after(text, "Problem:"), _after(text, "Answer:")
    expected = _product(problem)
    if int(answer) == expected:
        return json.dumps({"ok": True})
    return json.dumps({"ok": False, "flaw": f"{problem} is not {answer}"})


def adversarial_verification() -> PatternRun:
    """A solver answers, a verifier tries to break the answer; a broken one is retried.

    3 problems; one is wrong the first time: 4 solver calls, 4 verifier calls.
    """
    return run_pattern("adversarial verification", VERIFY_CODE, {
        "solver": ("Solves arithmetic problems.", _solve),
        "verifier": ("Checks a proposed answer and names its flaw.", _verify),
    })


# --------------------------------------------------------------------------- 4


GENERATE_CODE = '''
import asyncio
import json
batches = await asyncio.gather(*(
    task(f"Propose product names, style {s}", "generator", response_schema={"type": "array"})
    for s in ["short", "playful", "technical"]))
seen = set()
candidates = []
for name in [n for batch in batches for n in batch]:
    key = name.strip().lower()
    if key not in seen and 3 <= len(key) <= 12:
        seen.add(key)
        candidates.append(name.strip())
score_schema = {"type": "object", "properties": {"score": {"type": "integer"}},
                "required": ["score"]}
scores = await asyncio.gather(*(
    task(f"Score this name: {c}", "scorer", response_schema=score_schema) for c in candidates))
ranked = sorted(zip(candidates, scores), key=lambda pair: (-pair[1]["score"], pair[0]))
{"kept": len(candidates), "top": [name for name, _ in ranked[:3]]}
'''

_PROPOSALS = {
    "short": ["Fathom", "Deep", "Sonar"],
    "playful": ["fathom", "Whale Of A Time Agent", "Bubbles"],
    "technical": ["GraphLoop", "sonar ", "Py"],
}


def _score(text: str) -> str:
    name = _after(text, "Score this name:")
    return json.dumps({"score": len(set(name.lower()))})


def generate_and_filter() -> PatternRun:
    """Generators propose 9 names; code drops duplicates and bad lengths; a scorer ranks.

    3 generator calls; 5 names survive the filter: 5 scorer calls.
    """
    return run_pattern("generate-and-filter", GENERATE_CODE, {
        "generator": ("Proposes candidates as a JSON list.",
                      lambda text: json.dumps(_PROPOSALS[_after(text, "style")])),
        "scorer": ("Scores one candidate.", _score),
    })


# --------------------------------------------------------------------------- 5


TOURNAMENT_CODE = '''
import asyncio
entrants = ["plan A", "plan B", "plan C", "plan D", "plan E"]
schema = {"type": "object", "properties": {"winner": {"enum": ["first", "second"]}},
          "required": ["winner"]}
judged = 0
rounds = []

async def match(a, b):
    verdict = await task(f"Which is better?\\nfirst: {a}\\nsecond: {b}", "judge",
                         response_schema=schema, label=f"{a} vs {b}")
    return a if verdict["winner"] == "first" else b

field = entrants
while len(field) > 1:
    pairs = [(field[i], field[i + 1]) for i in range(0, len(field) - 1, 2)]
    bye = [field[-1]] if len(field) % 2 else []
    winners = await asyncio.gather(*(match(a, b) for a, b in pairs))
    judged += len(pairs)
    rounds.append({"matches": len(pairs), "bye": bye})
    field = list(winners) + bye
{"champion": field[0], "judge_calls": judged, "rounds": rounds}
'''

_STRENGTH = {"plan A": 3, "plan B": 5, "plan C": 1, "plan D": 4, "plan E": 2}


def _judge(text: str) -> str:
    first, second = _after(text, "first:"), _after(text, "second:")
    better = "first" if _STRENGTH[first] >= _STRENGTH[second] else "second"
    return json.dumps({"winner": better})


def tournament() -> PatternRun:
    """Single elimination over 5 entrants: 2 + 1 + 1 = 4 judge calls (N − 1), with byes.

    Round 1: A–B, C–D, E has a bye; round 2: B–D, E has a bye; final: B–E.
    """
    return run_pattern("tournament", TOURNAMENT_CODE, {
        "judge": ("Picks the better of two entries.", _judge),
    })


# --------------------------------------------------------------------------- 6


LOOP_CODE = '''
import asyncio
def key(name):
    return name.strip().lower()

seen = {key("fathom"): "fathom"}
frontier = ["fathom"]
rounds = 0
while frontier and rounds < MAX_ROUNDS:
    rounds += 1
    found = await asyncio.gather(*(
        task(f"List what {n} depends on", "explorer", response_schema={"type": "array"})
        for n in frontier))
    frontier = []
    for name in [n for batch in found for n in batch]:
        if key(name) not in seen:
            seen[key(name)] = name.strip()
            frontier.append(name.strip())
{"rounds": rounds, "done": not frontier, "found": sorted(seen.values())}
'''

_DEPENDS = {
    "fathom": ["LangGraph", "langchain", "Pydantic"],
    "langgraph": ["langchain-core", " LangGraph-Checkpoint"],
    "langchain": ["LangChain-Core", "langgraph"],
    "pydantic": ["pydantic-core", "typing-extensions"],
    "langchain-core": ["Pydantic", "typing-extensions"],
    "langgraph-checkpoint": ["langchain-core"],
    "pydantic-core": ["typing-extensions"],
    "typing-extensions": [],
}


def _depends(text: str) -> str:
    name = text.split("List what ", 1)[1].rsplit(" depends on", 1)[0]
    return json.dumps(_DEPENDS[name.strip().lower()])


def loop_until_done(max_rounds: int = 4) -> PatternRun:
    """Expand a dependency frontier until no new name comes back, at most `max_rounds`.

    Names are deduplicated by a stable key (stripped, lower case), so "LangChain-Core"
    and "langchain-core" are one node. Rounds ask 1, 3 and 4 explorers (8 calls); the
    third finds nothing new, so the loop ends before the cap of 4. With `max_rounds=2`
    the cap stops it with 4 names still unexplored.
    """
    code = LOOP_CODE.replace("MAX_ROUNDS", str(int(max_rounds)))
    return run_pattern("loop-until-done", code, {
        "explorer": ("Lists the direct dependencies of a package as a JSON list.", _depends),
    })


PATTERNS: dict[str, Callable[[], PatternRun]] = {
    "classify-and-act": classify_and_act,
    "fan-out-and-synthesize": fan_out_and_synthesize,
    "adversarial-verification": adversarial_verification,
    "generate-and-filter": generate_and_filter,
    "tournament": tournament,
    "loop-until-done": loop_until_done,
}


def main(argv: list[str] | None = None) -> dict[str, PatternRun]:
    """Run the named patterns (all by default) and print each result."""
    names = (argv if argv is not None else sys.argv[1:]) or list(PATTERNS)
    runs: dict[str, PatternRun] = {}
    for name in names:
        run = PATTERNS[name]()
        runs[name] = run
        print(f"== {run.name}: parent {run.parent_calls} model calls, subagents "
              f"{run.subagent_calls}")
        print(json.dumps(run.result, indent=2))
    return runs


if __name__ == "__main__":
    main()
