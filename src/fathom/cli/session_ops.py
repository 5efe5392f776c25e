"""What `/undo`, `/compact`, `/model` and `/cost` do to a session and its thread.

Each function takes the `Session` (and the thread) and returns the text to print; a
request that cannot be carried out (nothing to undo, an unknown model, another `fathom`
holding the thread) comes back as that text too, never as an exception.

- `undo_last_turn` puts the thread back on the checkpoint it was at before its last
  recorded turn (a fork: the next turn continues from there, and the model no longer sees
  the undone turn) and puts back the files that turn changed (`fathom.project.undo`).
- `compact_thread` summarizes the conversation now, with fathom's own
  `SummarizationMiddleware` (the one every agent runs), and stores the result in the
  thread, so the next request carries the summary instead of the old messages.
- `switch_model` builds another model for the following turns.
- `cost_report` adds up the session's calls and tokens on the thread and prices them.
"""

from __future__ import annotations

import logging
import os
from typing import Any, cast

from fathom.cli.pricing import PRICES_AS_OF, find_price, price_help
from fathom.project.build import DEFAULT_MODELS, KEY_VARIABLES, ModelSetupError, build_backend
from fathom.project.undo import RestoreReport, TurnRecord, restore_files
from fathom.usage import AgentTotals

__all__ = ["COMPACT_KEEP_MESSAGES", "compact_thread", "cost_report", "switch_model",
           "undo_last_turn"]

logger = logging.getLogger(__name__)

COMPACT_KEEP_MESSAGES = 2
"""Newest messages `/compact` keeps as they are (a tool call stays with its results)."""

COMPACT_AGENT = "(compaction)"
"""The name `/cost` lists the summary calls of `/compact` under."""


def _remote(session: Any, command: str) -> str | None:
    if getattr(session, "supports_local_ops", False):
        return None
    return (f"{command} works only in a local session: the thread's checkpoints and files "
            "are on the server")


def _thread_config(thread_id: str, checkpoint_id: str | None = None) -> dict[str, Any]:
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def _busy(run: Any) -> Any:
    """`run()`, or the message of the `ThreadBusyError` it raised."""
    from fathom.runs import ThreadBusyError

    try:
        return run()
    except ThreadBusyError as error:
        return str(error)


# --- /undo ---------------------------------------------------------------------------------


def undo_last_turn(session: Any, thread_id: str) -> str:
    """`/undo`: roll the thread and the files its last turn changed back to before it."""
    if (refused := _remote(session, "/undo")) is not None:
        return refused
    turns: list[TurnRecord] = session.journal.turns(thread_id)
    if not turns:
        return "nothing to undo on this thread"
    turn = turns[-1]
    setup = session.setup

    async def undo(agent: Any, checkpointer: Any) -> RestoreReport | str:
        if turn.start_checkpoint is None:  # the thread's first turn: back to no thread
            await checkpointer.adelete_thread(thread_id)
        else:
            target = _thread_config(thread_id, turn.start_checkpoint)
            if await checkpointer.aget_tuple(target) is None:
                return ("cannot undo: the thread's checkpoint from before that turn is gone "
                        "(was the thread deleted?)")
            # a copy of that checkpoint becomes the thread's head: the next turn goes on
            # from there, and the undone turn stays in the history, off the thread's path
            await agent.aupdate_state(target, None, as_node="__copy__")
        backend = build_backend(setup.project_dir, setup.home, setup.sandbox)
        return await restore_files(backend, turn)

    outcome = _busy(lambda: session.operate(thread_id, undo))
    if isinstance(outcome, str):
        return outcome
    session.journal.drop(turn)
    session.forget_run_state(thread_id)
    return _undo_message(turn, outcome, earlier=len(turns) - 1)


def _undo_message(turn: TurnRecord, report: RestoreReport, *, earlier: int) -> str:
    first_line = turn.message.strip().splitlines()[0] if turn.message.strip() else ""
    said = f' "{first_line[:60]}{"…" if len(first_line) > 60 else ""}"' if first_line else ""
    lines = [f"undid the last turn{said}: the conversation is back to before it"]
    if report.restored:
        lines.append("files restored: " + ", ".join(sorted(report.restored)))
    if report.removed:
        lines.append("files removed (the turn created them): " + ", ".join(sorted(report.removed)))
    if report.failed:
        lines.append("could not restore: " + "; ".join(report.failed))
    if not (report.restored or report.removed or report.failed):
        lines.append("no files to put back (the turn changed none through the file tools)")
    if turn.commands:
        shown = ", ".join(f"`{c[:40]}`" for c in turn.commands[:3])
        more = f" and {len(turn.commands) - 3} more" if len(turn.commands) > 3 else ""
        lines.append(f"not undone: what the turn's commands ({shown}{more}) changed on disk "
                     "— files changed by execute (or by MCP tools) are not tracked")
    lines.append(f"{earlier} earlier turn(s) can be undone" if earlier else
                 "no earlier turns to undo")
    return "\n".join(lines)


# --- /compact ------------------------------------------------------------------------------


def compact_thread(session: Any, thread_id: str) -> str:
    """`/compact`: summarize the thread's conversation now; the tokens before and after."""
    if (refused := _remote(session, "/compact")) is not None:
        return refused
    from langchain_core.runnables.config import var_child_runnable_config

    from fathom.usage import UNNAMED_AGENT, AgentUsage

    usage = AgentUsage()

    async def compact(agent: Any, checkpointer: Any) -> str:
        token = var_child_runnable_config.set({"callbacks": [usage]})  # /cost counts it
        try:
            return await _compact(session, agent, thread_id)
        finally:
            var_child_runnable_config.reset(token)

    text = _busy(lambda: session.operate(thread_id, compact))
    session.add_usage(thread_id, usage, rename={UNNAMED_AGENT: COMPACT_AGENT})
    return text


async def _compact(session: Any, agent: Any, thread_id: str) -> str:
    from langchain.agents.middleware.types import (
        AgentState,
        ExtendedModelResponse,
        ModelRequest,
    )
    from langchain_core.messages import AIMessage
    from langchain_core.messages.utils import count_tokens_approximately

    from fathom.middleware.context.history import apply_event
    from fathom.middleware.context.summarization import (
        COMPACT_FLAG,
        SUMMARIZATION_EVENT_KEY,
        SummarizationMiddleware,
    )

    config = _thread_config(thread_id)
    snapshot = await agent.aget_state(config)
    values = dict(snapshot.values or {})
    messages = list(values.get("messages", []))
    if not messages:
        return "nothing to compact: the thread has no messages yet"
    if snapshot.next:
        return "cannot compact while a run is unfinished or waiting for an approval"
    setup = session.setup
    summarizer = SummarizationMiddleware(
        backend=build_backend(setup.project_dir, setup.home, setup.sandbox),
        keep=("messages", COMPACT_KEEP_MESSAGES),
    )
    # the flag that asks a model step to summarize whatever the size
    state = cast("AgentState[Any]", {**values, COMPACT_FLAG: True})
    request = ModelRequest(model=setup.model, messages=messages, tools=[], state=state)
    compacted: list[Any] = []

    async def no_model_call(request: Any) -> AIMessage:
        compacted.extend(request.messages)  # the request the model would now be sent
        return AIMessage(content="")

    response = await summarizer.awrap_model_call(request, no_model_call)
    shown = apply_event(messages, values.get(SUMMARIZATION_EVENT_KEY))
    before = count_tokens_approximately(shown)
    command = response.command if isinstance(response, ExtendedModelResponse) else None
    update = dict((command.update if command is not None else None) or {})
    if SUMMARIZATION_EVENT_KEY not in update:
        return (f"nothing to compact: the conversation is only {len(shown)} message(s), "
                f"about {before:,} tokens")
    # the state keeps every message; the event makes the next model call show the summary
    await agent.aupdate_state(config, update, as_node="model")
    after = count_tokens_approximately(compacted)
    what = f"{len(shown) - (len(compacted) - 1)} older message(s) summarized"
    return (f"compacted: {what}; the conversation is about {after:,} tokens now "
            f"(was {before:,}; estimated)")


# --- /model --------------------------------------------------------------------------------


def _choices(session: Any) -> list[str]:
    setup = session.setup
    seen: dict[str, str] = {}
    if setup.config.model:
        seen.setdefault(setup.config.model, "fathom.toml")
    if env := os.environ.get("FATHOM_MODEL", "").strip():
        seen.setdefault(env, "FATHOM_MODEL")
    for definition in setup.sources.subagents:
        if "model" in definition:
            seen.setdefault(str(definition["model"]), f"subagent {definition['name']}")
    for provider, variable in KEY_VARIABLES.items():
        if os.environ.get(variable):
            seen.setdefault(DEFAULT_MODELS[provider], f"{variable} is set")
    seen.pop(setup.model_name, None)
    return [f"{name} ({why})" for name, why in seen.items()]


def switch_model(session: Any, name: str | None) -> str:
    """`/model [name]`: without a name, the current model and the configured choices;
    with one, that model from the next turn on (a model that cannot be built is refused
    and the current one kept)."""
    current = session.setup.model_name
    if name is None or not name.strip():
        choices = _choices(session)
        lines = [f"model: {current}"]
        if choices:
            lines.append("configured: " + " · ".join(choices))
        lines.append("/model provider:model switches from the next turn on "
                     "(e.g. /model openai:gpt-4.1-mini)")
        return "\n".join(lines)
    if (refused := _remote(session, "/model")) is not None:
        return refused
    name = name.strip()
    if ":" not in name:
        return (f"model {name!r} must be 'provider:model', e.g. 'openai:gpt-4.1'; "
                f"still using {current}")
    if name == current:
        return f"already using {current}"
    from fathom.project.build import build_model

    try:
        model = build_model(name, session.setup.config)
    except ModelSetupError as error:
        return f"{error}\nstill using {current}"
    session.setup.model = model
    session.setup.model_name = name
    return f"model: {name} from the next turn on (was {current})"


# --- /cost ---------------------------------------------------------------------------------


def _budget_lines(session: Any, thread_id: str) -> list[str]:
    """The thread's spend against the budget (all its runs and agents, async tasks as
    reported), from its `fathom_budget` channel; the configured caps when nothing is spent."""
    from fathom.budget import BUDGET_KEY, budget_summary

    values = session.values(thread_id) if hasattr(session, "values") else {}
    line = budget_summary((values or {}).get(BUDGET_KEY))
    if line is not None:
        return ["", f"{line} (whole thread, all agents)"]
    caps = getattr(getattr(session.setup, "config", None), "budget", None) or {}
    if caps:
        shown = ", ".join(f"{cap} = {value}" for cap, value in caps.items())
        return ["", f"budget: nothing spent on this thread yet (caps: {shown})"]
    return []


def cost_report(session: Any, thread_id: str) -> str:
    """`/cost`: calls and tokens per agent of this session's turns on the thread, with
    estimated prices where the model has one."""
    usage = session.usage_of(thread_id) if hasattr(session, "usage_of") else {}
    budget = _budget_lines(session, thread_id)
    if not usage:
        return "\n".join([f"no model calls on thread {thread_id} in this session yet", *budget])
    configured = getattr(getattr(session.setup, "config", None), "prices", None) or {}
    header = ("agent", "model", "calls", "input tokens", "output tokens", "estimate")
    rows: list[tuple[str, ...]] = []
    total_cost, overall = 0.0, AgentTotals()
    unpriced: list[str] = []
    sources: set[str] = set()
    for (agent, model), totals in usage.items():
        price = find_price(model, configured) if model else None
        if price is None:
            estimate = "—"
            if model and model not in unpriced:
                unpriced.append(model)
        else:
            cost = price.cost(totals.input_tokens, totals.output_tokens)
            total_cost += cost
            sources.add(price.source)
            estimate = f"${cost:.4f}"
        overall.add(totals)
        rows.append((agent, model or "(unknown)", str(totals.calls),
                     f"{totals.input_tokens:,}", f"{totals.output_tokens:,}", estimate))
    total_estimate = f"${total_cost:.4f}" if sources else "—"
    if sources and unpriced:
        total_estimate += "+"
    rows.append(("total", "", str(overall.calls), f"{overall.input_tokens:,}",
                 f"{overall.output_tokens:,}", total_estimate))
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]

    def line(row: tuple[str, ...]) -> str:
        cells = [row[i].ljust(widths[i]) if i < 2 else row[i].rjust(widths[i])
                 for i in range(len(row))]
        return "  ".join(cells).rstrip()

    out = [f"this session's turns on thread {thread_id}:", line(header),
           *(line(row) for row in rows)]
    if sources:
        where = " and ".join(sorted(sources))
        table = (f"; the default table holds public list prices of {PRICES_AS_OF}"
                 if "default table" in sources else "")
        out.append(f"estimates in USD from per-million-token prices ({where}{table}); cached "
                   "or discounted tokens cost less")
    out.extend(f"no price for {model}: {price_help(model)}" for model in unpriced)
    out.extend(budget)
    if hasattr(session, "prefix_recorder"):
        from fathom.cache_metrics import prefix_reuse_summary

        out.extend(["", prefix_reuse_summary(session.prefix_recorder(thread_id))])
    return "\n".join(out)
