"""A long run in a small context window: request sizes and recall, fathom vs deepagents.

A scripted model (`fathom.testing.ScriptedModel`) declares a small input window through
its profile (`{"max_input_tokens": W}`, W = 4,000 by default) and drives a 300-step run:
one custom tool, `observe(step)`, is called once per model turn for steps 1 to 300. Step 1
returns "the secret code is 4721"; every other step returns a ~100-character filler
sentence. After the last step the model answers "The secret code is X", with X taken
from whatever the messages it is shown still contain (or "unknown"). Both harnesses must
summarize the history many times to stay inside the window, so the run measures how big
the requests they send are and whether a fact from the first step survives.

Two modes:

* Worker: `--side fathom|deepagents [--steps N] [--window W]` performs one run in the
  current interpreter and prints one JSON line.
* Driver (no `--side`): runs both sides as subprocesses, fathom with the project's
  `.venv/bin/python` and deepagents with `benchmarks/.venv-deepagents` (`PYTHONPATH=src`,
  so the reference side can import `fathom.testing`'s scripted model and nothing else of
  fathom's), then prints a table.

`make bench` creates the reference environment and runs the driver.
"""

from __future__ import annotations

import json
import re
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
    positive_int,
    run_worker,
    side_parser,
)
from _harness import print_table as _print_table

Side = Literal["fathom", "deepagents"]
SIDES: tuple[Side, ...] = ("fathom", "deepagents")

DEFAULT_STEPS = 300
DEFAULT_WINDOW = 4_000
SECRET = "4721"
SECRET_STEP = 1
TOOL_NAME = "observe"

# The opening words of each harness's summarization prompt (what the summary request's last
# human message starts with). A request with no tools bound counts as one as well.
SUMMARY_PROMPT_PREFIXES = (
    "You are compressing the history",  # fathom
    "<role>\nContext Extraction Assistant",  # deepagents 0.7.32
)


_CODE = re.compile(r"secret code is (\d+)", re.IGNORECASE)


# --------------------------------------------------------------------------- worker


def observation(step: int, repeat: int = 1) -> str:
    """What `observe(step)` returns: the secret at `SECRET_STEP`, otherwise a ~100-character
    filler sentence, `repeat` times."""
    if step == SECRET_STEP:
        return f"the secret code is {SECRET}"
    sentence = (
        f"Step {step}: the sensors report nothing unusual today; every reading is inside "
        "its normal range so far."
    )
    return " ".join([sentence] * repeat)


def _make_tool(repeat: int = 1) -> Any:
    """The `observe` tool as a LangChain `@tool`."""
    from langchain_core.tools import tool

    @tool
    def observe(step: int) -> str:
        """Observe the environment at the given step and report what is seen."""
        return observation(step, repeat)

    return observe


def _message_text(message: Any) -> str:
    """All text of a message: its content plus the arguments of any tool calls."""
    content = message.content
    text = content if isinstance(content, str) else json.dumps(content, default=str)
    calls = getattr(message, "tool_calls", None) or []
    if calls:
        text += json.dumps([call.get("args") for call in calls], default=str)
    return text


def _find_code(messages: Sequence[Any]) -> str | None:
    """The last secret code mentioned in `messages`, or `None`."""
    codes = [m.group(1) for msg in messages for m in _CODE.finditer(_message_text(msg))]
    return codes[-1] if codes else None


def _is_summary_request(request: Any) -> bool:
    """Whether `request` asks for a summary rather than the next agent step.

    Agent steps always have the tools bound; both harnesses' summary calls have none and
    send the prompt as the last (and only) human message.
    """
    from langchain_core.messages import HumanMessage

    if not request.tools:
        return True
    last = request.last_message
    return isinstance(last, HumanMessage) and str(last.text).lstrip().startswith(
        SUMMARY_PROMPT_PREFIXES
    )


def _make_model(steps: int, window: int, counters: dict[str, int]) -> Any:
    """A `ScriptedModel` with a `window`-token profile that calls `observe` `steps` times.

    The policy keeps its own counters (in `counters`) instead of reading the conversation,
    because summarization shortens the messages the model is shown. Summary requests get
    a short summary that keeps any "secret code is NNNN" fact found in the prompt text.
    """
    from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

    def policy(request: ScriptRequest) -> Any:
        if _is_summary_request(request):
            counters["summarizations"] += 1
            code = _find_code(request.messages)
            done = counters["observe_calls"]
            summary = f"Summary: the agent has called {TOOL_NAME} for steps 1 to {done}."
            if code is not None:
                summary += f" Key fact: the secret code is {code}."
            return ai(summary)
        if counters["observe_calls"] < steps:
            counters["observe_calls"] += 1
            return ai("", tool_call(TOOL_NAME, {"step": counters["observe_calls"]}))
        return ai(f"The secret code is {_find_code(request.messages) or 'unknown'}")

    return ScriptedModel(policy=policy, profile={"max_input_tokens": window})


def run_side(side: Side, steps: int, window: int, repeat: int = 1) -> dict[str, Any]:
    """Run one agent of `side` for `steps` observe calls with a `window`-token model.

    Returns:
        The measurement: `side`, `steps`, `window`, `model_calls` (recorded requests,
        summary calls included), `peak_tokens`, `mean_tokens` (request sizes in
        `input_tokens`), `over_window` (requests above `window`), `summarizations`,
        `observe_calls`, `answer`, `correct`, and `seconds` (the `invoke` call only).

    Raises:
        RuntimeError: If the run ended before the model had called `observe` `steps` times.
    """
    if side == "fathom":
        from fathom import create_deep_agent
    else:
        from deepagents import create_deep_agent

    counters = {"observe_calls": 0, "summarizations": 0}
    model = _make_model(steps, window, counters)
    agent = create_deep_agent(model, [_make_tool(repeat)])
    config = {"recursion_limit": 10_000}
    start = time.perf_counter()
    result = agent.invoke(
        {"messages": [{"role": "user", "content": "Observe every step, then tell me the code."}]},
        config=config,
    )
    seconds = time.perf_counter() - start
    if counters["observe_calls"] < steps:
        msg = f"{side}: the run ended after {counters['observe_calls']} of {steps} steps"
        raise RuntimeError(msg)
    answer = str(result["messages"][-1].text)
    sizes = [r.input_tokens for r in model.requests]
    return {
        "side": side,
        "steps": steps,
        "window": window,
        "model_calls": len(sizes),
        "peak_tokens": max(sizes),
        "mean_tokens": round(sum(sizes) / len(sizes), 1),
        "over_window": sum(size > window for size in sizes),
        "summarizations": counters["summarizations"],
        "observe_calls": counters["observe_calls"],
        "answer": answer,
        "correct": answer == f"The secret code is {SECRET}",
        "seconds": round(seconds, 3),
    }


# --------------------------------------------------------------------------- driver


def _run_worker(
    side: Side, steps: int, window: int, repeat: int, python: Path
) -> dict[str, Any]:
    """Run one worker subprocess and parse its JSON line."""
    args = ["--steps", str(steps), "--window", str(window), "--repeat", str(repeat)]
    return run_worker(__file__, side, args, python)


HEADERS = [
    "side",
    "calls",
    "peak tokens",
    "mean tokens",
    "over window",
    "summarizations",
    "correct",
    "seconds",
]


def _table_rows(results: dict[Side, dict[str, Any]]) -> list[list[str]]:
    return [
        [
            side,
            f"{row['model_calls']:,}",
            f"{row['peak_tokens']:,}",
            f"{row['mean_tokens']:,.0f}",
            f"{row['over_window']:,}",
            f"{row['summarizations']:,}",
            "yes" if row["correct"] else "no",
            f"{row['seconds']:.1f}",
        ]
        for side, row in results.items()
    ]


def _mean_ratio(results: dict[Side, dict[str, Any]]) -> str:
    fathom, ref = results.get("fathom"), results.get("deepagents")
    if fathom is None or ref is None:
        return "—"
    return f"{float(ref['mean_tokens']) / float(fathom['mean_tokens']):,.2f}×"


def print_table(results: dict[Side, dict[str, Any]], steps: int, window: int) -> None:
    """Print the comparison table and the mean-token ratio."""
    title = f"A {steps:,}-step run with a {window:,}-token window (request sizes in tokens)"
    footer = f"deepagents ÷ fathom, mean tokens per request: {_mean_ratio(results)}"
    _print_table(title, HEADERS, _table_rows(results), footer)


def _progress(row: dict[str, Any]) -> None:
    print(
        f"  {row['side']:<10} {row['model_calls']:,} model calls "
        f"({row['observe_calls']:,} observe, {row['summarizations']:,} summaries), "
        f"peak {row['peak_tokens']:,} / mean {row['mean_tokens']:,.0f} tokens, "
        f"{row['over_window']:,} over the window, answer {row['answer']!r}, "
        f"{row['seconds']:.1f} s",
        file=sys.stderr,
        flush=True,
    )


def measure(
    steps: int, window: int, ref_python: Path, repeat: int = 1
) -> tuple[dict[Side, dict[str, Any]], list[str]]:
    """Run each available side once; the rows by side, and the failures."""
    results: dict[Side, dict[str, Any]] = {}
    failures: list[str] = []
    for side, python in available_sides(ref_python):
        try:
            row = _run_worker(side, steps, window, repeat, python)
        except SideFailed as exc:
            failures.append(str(exc))
            print(str(exc), file=sys.stderr, flush=True)
            continue
        results[side] = row
        _progress(row)
    return results, failures


LONG_STEPS, LONG_WINDOW, LONG_REPEAT = 300, 32_000, 4
"""The combined table's long run: 300 steps of ~400-character observations in 32k tokens."""


def collect(ref_python: Path = REF_PYTHON) -> list[Row]:
    """Rows for the combined table: request sizes over a 300-step run in a 32k window."""
    results, failures = measure(LONG_STEPS, LONG_WINDOW, ref_python, LONG_REPEAT)
    if failures:
        raise SideFailed("\n".join(failures))
    fathom, ref = results["fathom"], results.get("deepagents")
    section = f"Long run ({LONG_STEPS} steps, {LONG_WINDOW // 1000}k window)"

    def note(key: str) -> str:
        parts = [f"{side}: {row['summarizations']} summaries, secret "
                 f"{'recalled' if row['correct'] else 'lost'}" for side, row in results.items()]
        return "; ".join(parts) if key == "peak_tokens" else ""

    return [
        Row(section, "peak request", "tokens", fathom["peak_tokens"],
            ref["peak_tokens"] if ref else None, note=note("peak_tokens")),
        Row(section, "mean request", "tokens", fathom["mean_tokens"],
            ref["mean_tokens"] if ref else None),
    ]


def drive(steps: int, window: int, ref_python: Path, repeat: int = 1) -> int:
    """Run both sides and print the table; return the exit status."""
    start = time.perf_counter()
    results, failures = measure(steps, window, ref_python, repeat)
    if results:
        print_table(results, steps, window)
    print(f"total {time.perf_counter() - start:.1f} s")
    if failures:
        print(f"{len(failures)} run(s) failed", file=sys.stderr)
        return 1
    return 0


# --------------------------------------------------------------------------- CLI


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point (see the module docstring)."""
    parser = side_parser(__doc__)
    parser.add_argument(
        "--steps",
        type=positive_int,
        default=DEFAULT_STEPS,
        help="observe calls before the final answer (default: %(default)s)",
    )
    parser.add_argument(
        "--window",
        type=positive_int,
        default=DEFAULT_WINDOW,
        help="the model's declared max_input_tokens (default: %(default)s)",
    )
    parser.add_argument(
        "--repeat",
        type=positive_int,
        default=1,
        help="filler sentences per observation (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    if args.side is None:
        return drive(args.steps, args.window, args.ref_python, args.repeat)
    print(json.dumps(run_side(args.side, args.steps, args.window, args.repeat)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
