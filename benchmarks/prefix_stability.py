"""Prompt-cache prefix stability over a 20-step run, fathom vs deepagents.

Provider prompt caches (Anthropic's cache breakpoints, OpenAI's and DeepSeek's automatic
prefix caching) bill and serve the part of a request that repeats the start of an earlier
one from cache: cheaper and faster. An agent loop gets the most from them when every request
*extends* the previous one: the same system prompt, the same tool schemas, the same earlier
messages, byte for byte, with only the new assistant turn and tool results appended. Anything
that rewrites earlier bytes (a system prompt that changes between steps, reordered or edited
tool schemas, rewritten history) cuts the cached prefix at that point, and every byte after
it is paid for again.

This benchmark drives the same 20-step scripted run on each side with
`fathom.testing.ScriptedModel`. The main agent makes one tool call per step, a realistic mix:
`write_todos` (3×), `write_file` (3×), `read_file` (4×), `ls` (3×), `edit_file` (3×), a
custom tool `lookup_order` (3×) and one `task` delegation to a `researcher` subagent, then
answers. The agent is the full agent of `prompt_overhead.py` (custom tool, subagent spec,
memory `/AGENTS.md`, skills `/skills/`, same starting files). deepagents 0.7.32 has no
`write_todos` by default, so its side adds LangChain's `TodoListMiddleware` (the middleware
deepagents' own OpenAI Codex profile adds for that tool); without it the two runs could not
do the same work.

For each pair of consecutive requests of the MAIN agent (the subagent's requests are told
apart by their system prompt, which opens with the subagent spec's own prompt, and left
out), the script takes the length of the common prefix of the two requests'
`RecordedRequest.canonical_json()` (system prompt, tools, then messages, in that order) as a
fraction of the earlier request's canonical JSON length, not counting the `]}]` that closes
every canonical request (appending a message necessarily moves it). A request that extends
the previous one scores exactly 1.0, the ideal; a rewritten system prompt or tool list
scores about the share of the request that precedes the change, and a rewritten message
the share before that message. The table reports the minimum and mean fraction (higher is
better) and the number of pairs below 0.99; the driver prints where each such break begins.

Two modes, like the other benchmarks:

* Worker: `--side fathom|deepagents` runs one side in the current interpreter and prints one
  JSON line.
* Driver (no `--side`): runs both sides as subprocesses (fathom under `.venv`, deepagents
  under `benchmarks/.venv-deepagents` with `PYTHONPATH=src`) and prints a table.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from _harness import (
    REF_PYTHON,
    Row,
    SideFailed,
    available_sides,
    print_table,
    run_worker,
    side_parser,
)
from prompt_overhead import SUBAGENT_NAME, SUBAGENT_SPEC, full_agent_kwargs, starting_files

from fathom.cache_metrics import common_prefix_length  # the same measure /cost shows

Side = Literal["fathom", "deepagents"]
SIDES: tuple[Side, ...] = ("fathom", "deepagents")

BREAK_THRESHOLD = 0.99
"""A pair whose prefix fraction is below this counts as a cache break."""

CLOSING = "]}]"
"""How every canonical request ends (messages list, its dict, the top-level list). A request
that appends messages to the previous one necessarily differs there, so these characters are
not counted in the earlier request's length."""

SUBAGENT_MARKER = SUBAGENT_SPEC["system_prompt"].split(".")[0]
"""The opening sentence of the subagent's system prompt; the main agent's never contains it."""

USER_MESSAGE = (
    "Plan and draft a small order-status web service: write the plan, a first version of "
    "the app, and the findings of a short research task, checking orders as you go."
)

PLAN = """# Plan

1. Sketch the service: one GET /orders/{id} endpoint.
2. Write a first version in /src/app.py.
3. Research how the order backend reports delays.
"""

APP = """from fastapi import FastAPI

app = FastAPI()


@app.get("/orders/{order_id}")
def order_status(order_id: str) -> dict[str, str]:
    return {"id": order_id, "status": "unknown"}
"""

FINDINGS = """# Findings

- The order backend reports delays in its status text.
- Orders ship within two days.
"""

TODOS = ("Write the plan", "Draft the app", "Research order delays")


def _todos(done: int, current: int | None) -> list[dict[str, str]]:
    """The todo list with the first `done` items completed and item `current` in progress."""
    items = []
    for k, content in enumerate(TODOS):
        status = "completed" if k < done else "in_progress" if k == current else "pending"
        items.append({"content": content, "status": status})
    return items


STEPS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("write_todos", {"todos": _todos(0, 0)}),
    ("write_file", {"file_path": "/notes/plan.md", "content": PLAN}),
    ("read_file", {"file_path": "/notes/plan.md"}),
    ("ls", {"path": "/"}),
    (
        "edit_file",
        {
            "file_path": "/notes/plan.md",
            "old_string": "one GET /orders/{id} endpoint",
            "new_string": "one GET /orders/{id} endpoint and a health check",
        },
    ),
    ("lookup_order", {"order_id": "A-1001"}),
    ("write_todos", {"todos": _todos(1, 1)}),
    ("write_file", {"file_path": "/src/app.py", "content": APP}),
    ("read_file", {"file_path": "/src/app.py"}),
    (
        "task",
        {
            "description": "Find out how the order backend reports delayed orders and "
            "summarize it in two bullet points.",
            "subagent_type": SUBAGENT_NAME,
        },
    ),
    (
        "edit_file",
        {
            "file_path": "/src/app.py",
            "old_string": '"status": "unknown"',
            "new_string": '"status": "shipped"',
        },
    ),
    ("lookup_order", {"order_id": "A-1002"}),
    ("ls", {"path": "/src"}),
    ("write_file", {"file_path": "/notes/findings.md", "content": FINDINGS}),
    ("read_file", {"file_path": "/notes/findings.md"}),
    (
        "edit_file",
        {
            "file_path": "/notes/findings.md",
            "old_string": "within two days",
            "new_string": "within two working days",
        },
    ),
    ("lookup_order", {"order_id": "A-1003"}),
    ("write_todos", {"todos": _todos(3, None)}),
    ("ls", {"path": "/notes"}),
    ("read_file", {"file_path": "/notes/plan.md"}),
)
"""The main agent's tool calls, one per step."""

FINAL_ANSWER = "The plan, the app and the findings are in /notes and /src."
SUBAGENT_ANSWER = "- Delays show in the status text.\n- Most orders ship within two days."


# --------------------------------------------------------------------------- worker


def is_subagent_request(request: Any) -> bool:
    """Whether a recorded or live request is the subagent's (by its system prompt)."""
    return SUBAGENT_MARKER in (request.system_prompt or "")


def _make_model() -> Any:
    """A scripted model that plays `STEPS` for the main agent and answers the subagent."""
    from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

    counter = {"main": 0}

    def policy(request: ScriptRequest) -> Any:
        if is_subagent_request(request):
            return ai(SUBAGENT_ANSWER)
        step = counter["main"]
        counter["main"] += 1
        if step < len(STEPS):
            name, args = STEPS[step]
            return ai("", tool_call(name, args))
        return ai(FINAL_ANSWER)

    return ScriptedModel(policy=policy)


def _section(canonical: str, position: int) -> str:
    """Which part of a canonical request `position` falls in: system, tools or messages."""
    tools_at = canonical.find(',{"tools":')
    messages_at = canonical.find(',{"messages":', max(tools_at, 0))
    if 0 <= messages_at <= position:
        return "messages"
    if 0 <= tools_at <= position:
        return "tools"
    return "system"


def prefix_kept(earlier: str, later: str) -> tuple[int, float]:
    """How much of canonical request `earlier` starts `later`: the common prefix in
    characters, and as a fraction of `earlier` without its `CLOSING` characters, so a
    request that extends `earlier` (the next step of a loop, or a forked subagent's first
    request after its parent's last) scores exactly 1.0."""
    prefix = common_prefix_length(earlier, later)
    body = len(earlier) - len(CLOSING) if earlier.endswith(CLOSING) else len(earlier)
    return prefix, (min(1.0, prefix / body) if body > 0 else 1.0)


def prefix_pairs(canonicals: Sequence[str]) -> list[dict[str, Any]]:
    """For each consecutive pair: the common prefix as a fraction of the earlier request.

    The earlier request's length leaves out its closing `CLOSING` characters, so a request
    that extends the previous one scores exactly 1.0.

    Returns:
        One dict per pair: `pair` (index of the earlier request), `prefix` (characters),
        `fraction`, `section` (where the first difference is) and `context` (a few
        characters of each request from there, for pairs below `BREAK_THRESHOLD`).
    """
    pairs = []
    for k in range(len(canonicals) - 1):
        earlier, later = canonicals[k], canonicals[k + 1]
        prefix, fraction = prefix_kept(earlier, later)
        pair: dict[str, Any] = {
            "pair": k,
            "prefix": prefix,
            "fraction": fraction,
            "section": _section(earlier, prefix),
        }
        if fraction < BREAK_THRESHOLD:
            pair["context"] = [earlier[prefix : prefix + 80], later[prefix : prefix + 80]]
        pairs.append(pair)
    return pairs


def run_side(side: Side) -> dict[str, Any]:
    """Run the 20-step script on `side` and measure the main agent's prefix stability.

    Returns:
        `side`, `main_requests`, `subagent_requests`, `tool_steps` (main-agent tool calls
        made), `fractions` (one per consecutive pair), `min`, `mean`, `below` (pairs under
        `BREAK_THRESHOLD`), `breaks` (those pairs, with where they diverge), `mean_chars`
        (mean canonical JSON length of the main requests) and `seconds` (`invoke` only).

    Raises:
        RuntimeError: If the run did not make every scripted tool call.
    """
    kwargs = full_agent_kwargs()
    if side == "fathom":
        from fathom import create_deep_agent
    else:
        from deepagents import create_deep_agent
        from langchain.agents.middleware import TodoListMiddleware

        kwargs["middleware"] = [TodoListMiddleware()]
    model = _make_model()
    agent = create_deep_agent(model, **kwargs)
    start = time.perf_counter()
    agent.invoke(
        {"messages": [{"role": "user", "content": USER_MESSAGE}], "files": starting_files()},
        config={"recursion_limit": 1_000},
    )
    seconds = time.perf_counter() - start
    requests = model.requests
    main = [r for r in requests if not is_subagent_request(r)]
    tool_steps = sum(1 for r in main if r.response.tool_calls)
    if tool_steps < len(STEPS):
        raise RuntimeError(f"{side}: made {tool_steps} of {len(STEPS)} scripted tool calls")
    canonicals = [r.canonical_json() for r in main]
    pairs = prefix_pairs(canonicals)
    fractions = [p["fraction"] for p in pairs]
    return {
        "side": side,
        "main_requests": len(main),
        "subagent_requests": len(requests) - len(main),
        "tool_steps": tool_steps,
        "fractions": fractions,
        "min": min(fractions),
        "mean": sum(fractions) / len(fractions),
        "below": sum(f < BREAK_THRESHOLD for f in fractions),
        "breaks": [p for p in pairs if p["fraction"] < BREAK_THRESHOLD],
        "mean_chars": round(sum(map(len, canonicals)) / len(canonicals), 1),
        "seconds": round(seconds, 3),
    }


# --------------------------------------------------------------------------- driver


def measure(ref_python: Path) -> dict[Side, dict[str, Any]]:
    """Run the fathom worker and, when `ref_python` exists, the deepagents worker.

    Raises:
        SideFailed: If a worker fails.
    """
    results: dict[Side, dict[str, Any]] = {
        side: run_worker(__file__, side, [], python)
        for side, python in available_sides(ref_python)
    }
    for row in results.values():
        _progress(row)
    return results


def _progress(row: dict[str, Any]) -> None:
    print(
        f"  {row['side']:<10} {row['main_requests']} main-agent requests "
        f"({row['subagent_requests']} subagent requests left out), mean request "
        f"{row['mean_chars']:,.0f} chars, {row['below']} pair(s) below {BREAK_THRESHOLD}",
        file=sys.stderr,
        flush=True,
    )
    for brk in row["breaks"]:
        earlier, later = brk["context"]
        print(
            f"    pair {brk['pair']}->{brk['pair'] + 1}: {brk['fraction']:.3f}, diverges in "
            f"{brk['section']} at char {brk['prefix']:,}: {earlier!r} vs {later!r}",
            file=sys.stderr,
            flush=True,
        )


SECTION = "Prompt-cache prefix stability (20-step run, main agent)"


def rows_from(results: dict[Side, dict[str, Any]]) -> list[Row]:
    """Rows for the combined table (a missing side gives `None`)."""
    fathom, ref = results.get("fathom"), results.get("deepagents")

    def get(row: dict[str, Any] | None, key: str) -> float | None:
        return None if row is None else float(row[key])

    pairs = len((fathom or ref or {"fractions": []})["fractions"])
    how = "common prefix of consecutive canonical requests / earlier request; 1.0 = extends it"
    extra = "" if ref is None else "; deepagents + TodoListMiddleware for write_todos"
    return [
        Row(
            SECTION,
            "prefix kept, min",
            "fraction",
            get(fathom, "min"),
            get(ref, "min"),
            better="higher",
            note=how + extra,
        ),
        Row(
            SECTION,
            "prefix kept, mean",
            "fraction",
            get(fathom, "mean"),
            get(ref, "mean"),
            better="higher",
            note=f"over {pairs} consecutive pairs",
        ),
        Row(
            SECTION,
            f"pairs below {BREAK_THRESHOLD}",
            "pairs",
            get(fathom, "below"),
            get(ref, "below"),
            note=f"of {pairs}; each is a prompt-cache break",
        ),
    ]


def collect(ref_python: Path = REF_PYTHON) -> list[Row]:
    """Rows for the combined table: min and mean prefix fraction, pairs below 0.99.

    Raises:
        SideFailed: If a worker fails.
    """
    return rows_from(measure(ref_python))


def _fmt(row: Row, value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.4f}" if row.unit == "fraction" else f"{value:,.0f}"


def drive(ref_python: Path) -> int:
    """Run both sides, print the table; return the exit status."""
    start = time.perf_counter()
    try:
        rows = collect(ref_python)
    except SideFailed as exc:
        print(str(exc), file=sys.stderr)
        return 1
    print_table(
        f"Prompt-cache prefix stability over a {len(STEPS)}-step run (main agent)",
        ["metric", "unit", "fathom", "deepagents", "deepagents ÷ fathom", "better"],
        [
            [
                row.metric,
                row.unit,
                _fmt(row, row.fathom),
                _fmt(row, row.deepagents),
                "—" if row.ratio is None else f"{row.ratio:.3f}×",
                row.better,
            ]
            for row in rows
        ],
        f"total {time.perf_counter() - start:.1f} s",
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point (see the module docstring)."""
    parser = side_parser(__doc__)
    args = parser.parse_args(argv)
    if args.side is None:
        return drive(args.ref_python)
    print(json.dumps(run_side(args.side), ensure_ascii=False), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
