"""`fathom stats sticky` and `fathom calls`: measurements for choosing a multi-agent pattern.

    fathom stats sticky [--idle 30m]     the repeated-request ratio over this project's
                                         threads (--url URL: a server's), with the five
                                         numbers, the savings and the verdict
    fathom calls THREAD [--run RUN]      each model call of a thread's runs: caller,
                                         messages, tools, tokens, the new part of the prompt
    fathom calls --capture FILE          the same card from a JSONL or HAR capture

A turn's domain is read from the thread (which subagent, skill or handoff target served it:
`fathom.patterns.domains`), from a tool -> domain table (`--domain TOOL=DOMAIN`), or from a
labelling function (`--label module:function`, given a `fathom.measure.sticky.TurnView`).
A server's threads and calls are read with the LangGraph SDK: the threads' checkpoint
history, and the call records `fathom serve` keeps in each thread's `fathom_calls` metadata.

Only the standard library is imported here at start-up (`fathom --help` builds the parsers).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langgraph_sdk.client import LangGraphClient

    from fathom.measure.calls import CallRecord
    from fathom.measure.sticky import Turn, TurnView
    from fathom.pricing import Price

__all__ = [
    "add_calls_parser",
    "add_stats_parser",
    "calls_by_run",
    "calls_command",
    "calls_report",
    "server_calls",
    "server_snapshots",
    "server_turns",
    "stats_command",
]

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
HISTORY_PAGE = 100
"""Checkpoints asked for per history request."""
SEARCH_PAGE = 100
"""Threads asked for per search request."""


def add_stats_parser(commands: Any) -> None:
    """Add `stats` (with `stats sticky`) to `fathom`'s subparsers."""
    stats = commands.add_parser(
        "stats", help="measurements over this project's threads or a server's",
        description="Measurements for choosing a multi-agent pattern over real threads.",
    )  # fmt: skip
    which = stats.add_subparsers(dest="stats_command", metavar="WHAT")
    sticky = which.add_parser(
        "sticky", help="the repeated-request ratio: how often a turn stays in its domain",
        description="Over the threads, the share of adjacent turns of one thread that stay in "
        "the same domain (subagent, skill or handoff target) within the idle threshold; with "
        "the session lengths, the mean same-domain run, the switch rate, the ratio at 5, 30 "
        "and 120 minutes, the savable calls per day and the verdict (under about 15 %, "
        "stateful patterns rarely pay).",
    )  # fmt: skip
    sticky.add_argument("--idle", default="30m", metavar="DURATION",
                        help="the idle threshold: a later turn is a fresh start (default 30m; "
                        "90s, 2h, 1d; a bare number is minutes)")
    sticky.add_argument("--url", "--server", dest="url", metavar="URL",
                        help="read the threads of this server instead of this project's")
    sticky.add_argument("--thread", action="append", dest="threads", metavar="ID",
                        help="only this thread (repeatable)")
    sticky.add_argument("--limit", type=int, default=1000, metavar="N",
                        help="at most this many threads, most recent first (default 1000)")
    sticky.add_argument("--domain", action="append", default=[], metavar="TOOL=DOMAIN",
                        help="a call of TOOL serves DOMAIN (repeatable; for agents wrapped as "
                        "tools)")
    sticky.add_argument("--label", metavar="MODULE:FUNCTION",
                        help="label each turn with this function of a TurnView instead")
    sticky.add_argument("--turns-per-day", type=float, metavar="N",
                        help="project the savings to this traffic (default: the turns over "
                        "the days they span)")
    sticky.add_argument("--price", metavar="IN,OUT",
                        help="USD per million input and output tokens, for the money saved "
                        "(default: the project model's price, when known)")
    sticky.add_argument("--json", action="store_true", help="print the card as JSON")
    sticky.add_argument("--project", default=argparse.SUPPRESS, metavar="DIR")


def add_calls_parser(commands: Any) -> None:
    """Add `calls` to `fathom`'s subparsers."""
    calls = commands.add_parser(
        "calls", help="a thread's model calls: caller, messages, tools, tokens, new prompt part",
        description="The call card of each run of a thread: every model call with its caller "
        "(agent or subagent), the messages it sent, the tools it offered, its input, output "
        "and reasoning tokens, and what it added to the prompt over the same caller's "
        "previous call. Or the same card from a capture of the model API's bodies.",
    )  # fmt: skip
    calls.add_argument("thread", nargs="?", metavar="THREAD",
                       help="the thread (a unique prefix of a local one will do)")
    calls.add_argument("--url", "--server", dest="url", metavar="URL",
                       help="the thread is on this server")
    calls.add_argument("--run", metavar="RUN", help="only this run (a prefix of its id)")
    calls.add_argument("--last", action="store_true", help="only the thread's last run")
    calls.add_argument("--capture", metavar="FILE",
                       help="read a JSONL or HAR capture of Responses or Chat Completions "
                       "bodies instead of a thread")
    calls.add_argument("--name", action="append", default=[], metavar="TEXT=NAME",
                       help="with --capture: a call whose system prompt holds TEXT is NAME's "
                       "(repeatable)")
    calls.add_argument("--brief", action="store_true", help="the table only")
    calls.add_argument("--json", action="store_true", help="print the records as JSON")
    calls.add_argument("--project", default=argparse.SUPPRESS, metavar="DIR")


def _fail(message: str, code: int = EXIT_USAGE) -> int:
    print(f"fathom: {message}", file=sys.stderr)
    return code


def _pairs(values: Sequence[str], what: str) -> dict[str, str]:
    table: dict[str, str] = {}
    for value in values:
        key, sep, name = value.partition("=")
        if not sep or not key or not name:
            raise ValueError(f"{what} must be KEY=VALUE, not {value!r}")
        table[key] = name
    return table


def _label(args: argparse.Namespace) -> Callable[[TurnView], str | None]:
    from fathom.patterns.domains import domain_labeller

    if args.label:
        import importlib

        from fathom.cli.startup import project_dir

        module, _, name = str(args.label).partition(":")
        if not module or not name:
            raise ValueError(f"--label must be module:function, not {args.label!r}")
        folder = str(project_dir(args))
        sys.path.insert(0, folder)  # a module of the project directory will do
        try:
            function = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as error:
            raise ValueError(f"cannot load --label {args.label}: {error}") from error
        finally:
            sys.path.remove(folder)
        return function
    return domain_labeller(_pairs(args.domain, "--domain"))


def _price(text: str) -> Price:
    from fathom.pricing import Price

    parts = text.replace("/", ",").split(",")
    try:
        tokens_in, tokens_out = (float(p) for p in parts)
    except ValueError as error:
        raise ValueError(f"--price must be IN,OUT in USD per million tokens, not {text!r}") \
            from error
    return Price(tokens_in, tokens_out, source="--price")


# --------------------------------------------------------------------------- a server's


async def server_snapshots(client: LangGraphClient, thread_id: str
                           ) -> list[tuple[float, dict[str, Any]]]:
    """A server thread's checkpoints as (time, values), oldest first (all pages)."""
    from fathom.project.measure import timestamp

    found: list[tuple[float, dict[str, Any]]] = []
    before: str | None = None
    while True:
        page = await client.threads.get_history(thread_id, limit=HISTORY_PAGE,
                                                before=before)  # pyright: ignore[reportArgumentType]
        for state in page:
            values: Any = state.get("values") or {}
            found.append((timestamp(state.get("created_at")),
                          dict(values) if isinstance(values, Mapping) else {}))
        if len(page) < HISTORY_PAGE:
            break
        last = page[-1].get("checkpoint") or {}
        before = last.get("checkpoint_id") or page[-1].get("checkpoint_id")
        if not before:
            break
    return sorted(found, key=lambda s: s[0])


async def _server_threads(client: LangGraphClient, wanted: Sequence[str] | None,
                          limit: int) -> list[dict[str, Any]]:
    if wanted:
        return [dict(await client.threads.get(t)) for t in wanted]
    threads: list[dict[str, Any]] = []
    while len(threads) < limit:
        page = await client.threads.search(limit=min(SEARCH_PAGE, limit - len(threads)),
                                           offset=len(threads))
        threads.extend(dict(t) for t in page)
        if len(page) < SEARCH_PAGE:
            break
    return threads


async def server_turns(
    client: LangGraphClient, label: Callable[[TurnView], str | None],
    wanted: Sequence[str] | None = None, limit: int = 1000,
) -> tuple[list[Turn], list[CallRecord], list[dict[str, Any]]]:
    """The turns of a server's threads, their stored call records and their newest states."""
    from fathom.measure.calls import CALLS_METADATA_KEY, records_from_json
    from fathom.measure.sticky import thread_turns

    turns: list[Turn] = []
    records: list[CallRecord] = []
    latest: list[dict[str, Any]] = []
    for thread in await _server_threads(client, wanted, limit):
        thread_id = str(thread["thread_id"])
        snapshots = await server_snapshots(client, thread_id)
        turns.extend(thread_turns(thread_id, snapshots, label))
        if snapshots:
            latest.append(snapshots[-1][1])
        stored = (thread.get("metadata") or {}).get(CALLS_METADATA_KEY)
        records.extend(records_from_json(stored if isinstance(stored, list) else []))
    return turns, records, latest


async def server_calls(client: LangGraphClient, thread_id: str) -> list[CallRecord]:
    """The call records `fathom serve` kept on a thread."""
    from fathom.measure.calls import CALLS_METADATA_KEY, records_from_json

    thread = await client.threads.get(thread_id)
    stored = (thread.get("metadata") or {}).get(CALLS_METADATA_KEY)
    return records_from_json(stored if isinstance(stored, list) else [])


# --------------------------------------------------------------------------- stats sticky


def _card_inputs(records: Sequence[CallRecord], latest: Iterable[Mapping[str, Any]]
                 ) -> tuple[tuple[float, float] | None, float | None]:
    """Average (input, output) tokens and seconds of a model call, from what is known."""
    from fathom.measure.sticky import message_usage

    if records:
        tokens = (sum(r.input_tokens for r in records) / len(records),
                  sum(r.output_tokens for r in records) / len(records))
        timed = [r.seconds for r in records if r.seconds is not None]
        return tokens, (sum(timed) / len(timed) if timed else None)
    calls = tokens_in = tokens_out = 0
    for state in latest:
        n, i, o = message_usage(state.get("messages") or [])
        calls, tokens_in, tokens_out = calls + n, tokens_in + i, tokens_out + o
    return ((tokens_in / calls, tokens_out / calls) if calls else None), None


def _local_price(project: Path, models: set[str]) -> Price | None:
    from fathom.pricing import find_price
    from fathom.project.config import ConfigError, load_config

    if len(models) != 1:
        return None
    try:
        config = load_config(project, Path.home())
    except ConfigError:
        return None
    return find_price(next(iter(models)), config.prices)


def _card_json(card: Any) -> dict[str, Any]:
    import dataclasses

    data = dataclasses.asdict(card)
    data["by_threshold"] = {str(int(k)): v for k, v in card.by_threshold.items()}
    data["verdict"] = card.verdict
    return data


def stats_command(args: argparse.Namespace) -> int:
    """Run `fathom stats ...`."""
    import asyncio

    if args.stats_command != "sticky":
        print("usage: fathom stats sticky [--idle 30m] [--url URL]  (fathom stats sticky -h)")
        return EXIT_USAGE
    from fathom.measure.sticky import format_sticky_card, parse_duration, sticky_card

    try:
        idle = parse_duration(args.idle)
        label = _label(args)
        price = _price(args.price) if args.price else None
    except ValueError as error:
        return _fail(str(error))
    if args.url:
        import httpx

        from fathom.cli.tasks import server_client

        client = server_client(args.url)
        try:
            turns, records, latest = asyncio.run(
                server_turns(client, label, args.threads, args.limit))
        except (httpx.HTTPError, ValueError) as error:  # down, refused or garbled
            return _fail(f"cannot read the threads of {args.url}: {error}", EXIT_FAILED)
    else:
        from fathom.cli.startup import project_dir
        from fathom.measure.calls import records_from_json
        from fathom.project.threads import ThreadIndex, threads_db_path

        project = project_dir(args)
        db_path = threads_db_path(project, Path.home())
        index = ThreadIndex(db_path)
        infos = index.list()[: args.limit]
        ids = list(args.threads or [i.thread_id for i in infos])
        turns, records, latest = asyncio.run(_local(db_path, ids, label))
        records = [r for t in ids for r in records_from_json(index.calls(t))]
        if price is None:
            price = _local_price(project, {i.model for i in infos if i.thread_id in ids})
    tokens, seconds = _card_inputs(records, latest)
    card = sticky_card(turns, idle_s=idle, turns_per_day=args.turns_per_day,
                       tokens_per_call=tokens, price=price, seconds_per_call=seconds)
    if args.json:
        print(json.dumps(_card_json(card), ensure_ascii=False))
    else:
        print(format_sticky_card(card))
    return EXIT_OK


async def _local(db_path: Path, ids: Sequence[str], label: Callable[[TurnView], str | None]
                 ) -> tuple[list[Turn], list[CallRecord], list[dict[str, Any]]]:
    from fathom.measure.sticky import thread_turns
    from fathom.project.measure import local_snapshots

    turns: list[Turn] = []
    latest: list[dict[str, Any]] = []
    for thread_id in ids:
        snapshots = await local_snapshots(db_path, thread_id)
        turns.extend(thread_turns(thread_id, snapshots, label))
        if snapshots:
            latest.append(snapshots[-1][1])
    return turns, [], latest


# --------------------------------------------------------------------------- calls


def calls_by_run(records: Sequence[CallRecord]) -> list[tuple[str | None, list[CallRecord]]]:
    """The records grouped by run, in order (consecutive records of one run form a group)."""
    groups: list[tuple[str | None, list[CallRecord]]] = []
    for record in records:
        if groups and groups[-1][0] == record.run_id:
            groups[-1][1].append(record)
        else:
            groups.append((record.run_id, [record]))
    return groups


def _select(records: Sequence[CallRecord], run: str | None, last: bool
            ) -> list[tuple[str | None, list[CallRecord]]]:
    groups = calls_by_run(records)
    if run:
        groups = [g for g in groups if (g[0] or "").startswith(run)]
    return groups[-1:] if last else groups


def calls_report(records: Sequence[CallRecord], *, run: str | None = None, last: bool = False,
                 brief: bool = False) -> str:
    """The call card of each run of `records` (`run`: the runs whose id starts so; `last`:
    only the last run)."""
    from fathom.measure.calls import format_call_card

    groups = _select(records, run, last)
    if not groups:
        return f"no calls of a run {run}" if run and records else (
            "no model calls recorded on this thread")
    parts = []
    for n, (run_id, group) in enumerate(groups, 1):
        title = f"run {run_id}" if run_id else "calls"
        if len(groups) > 1:
            title += f" ({n} of {len(groups)})"
        parts.append(f"── {title}\n{format_call_card(group, details=not brief)}")
    return "\n\n".join(parts)


def _local_thread(index: Any, ref: str) -> str:
    known = [info.thread_id for info in index.list()]
    matches = [t for t in known if t == ref] or [t for t in known if t.startswith(ref)]
    if len(matches) == 1:
        return matches[0]
    why = "is more than one thread" if matches else "is not a thread of this project"
    raise ValueError(f"{ref} {why}; `fathom threads` lists them")


def calls_command(args: argparse.Namespace) -> int:
    """Run `fathom calls ...`."""
    import asyncio

    from fathom.measure.calls import records_from_json

    if args.capture:
        from fathom.measure.capture import read_capture

        try:
            records = read_capture(args.capture, _pairs(args.name, "--name"))
        except (OSError, ValueError) as error:
            return _fail(f"cannot read the capture {args.capture}: {error}", EXIT_FAILED)
    elif not args.thread:
        return _fail("fathom calls needs a THREAD (or --capture FILE); `fathom threads` "
                     "lists this project's")
    elif args.url:
        import httpx

        from fathom.cli.tasks import server_client

        try:
            records = asyncio.run(server_calls(server_client(args.url), args.thread))
        except (httpx.HTTPError, ValueError) as error:  # down, refused, no such thread
            status = getattr(getattr(error, "response", None), "status_code", None)
            if status == 404:
                return _fail(f"thread {args.thread} was not found on {args.url}", EXIT_FAILED)
            return _fail(f"cannot read thread {args.thread} from {args.url}: {error}",
                         EXIT_FAILED)
    else:
        from fathom.cli.startup import project_dir
        from fathom.project.threads import ThreadIndex, threads_db_path

        index = ThreadIndex(threads_db_path(project_dir(args), Path.home()))
        try:
            thread_id = _local_thread(index, args.thread)
        except ValueError as error:
            return _fail(str(error), EXIT_FAILED)
        records = records_from_json(index.calls(thread_id))
    if args.json:
        chosen = [r for _, group in _select(records, args.run, args.last) for r in group]
        print(json.dumps([r.as_json() for r in chosen], ensure_ascii=False))
        return EXIT_OK
    print(calls_report(records, run=args.run, last=args.last, brief=args.brief))
    return EXIT_OK
