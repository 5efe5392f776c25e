"""The repeated-request ratio ("sticky rate"): how often a turn can reuse its last turn's domain.

A stateful pattern (handoffs, skills, a router that remembers its route) saves the call that
re-enters a domain: the handoff, the skill load, the triage. It can only save it when a turn
lands in the domain the previous turn of the same conversation used, soon enough that the
conversation is still going. So, over a set of threads:

- the turns of each thread are taken in time order (threads are never stitched together:
  pairs are formed inside a thread only);
- a pair of adjacent turns is **sticky** when both have the same domain and the second came
  at most `idle` seconds after the first (a later one is a fresh start);
- the ratio is sticky pairs / all adjacent pairs. A single-turn thread adds no pairs.

```
thread A:  [coffee] [coffee] [coffee] [flight]   3 pairs, 2 sticky: 2/3
```

The domain of a turn is a label: which subagent, skill or handoff target served it
(`fathom.patterns.domains.turn_domain` reads it from the thread's messages), a business key
(the order or ticket the turn is about), or whatever a labelling function says. A turn with
no label (`None`) is never sticky and is no switch either; the card counts such turns.

`sticky_card` reports what a decision needs: the session-length distribution (share of
single-turn threads, P50 and P90 turns, nearest rank), the ratio, the mean length of
same-domain runs (by label only, gaps ignored), the switch rate (adjacent pairs whose labels
differ), the ratio at idle thresholds of 5, 30 and 120 minutes (a big spread means the
session boundary is ill-defined), and the savings: savable calls per day = turns per day x
ratio, then tokens, US dollars and seconds per day when the average tokens, the price and the
latency of a call are known. The ratio is an upper bound, not a promise: context compaction
can force a reload, and a stateful pattern has its own costs. Under about 15 %, stateful
patterns rarely pay for their complexity; subagents' fixed cost and isolation are then the
better default.
"""

from __future__ import annotations

import itertools
import math
import re
import textwrap
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fathom.pricing import Price

__all__ = [
    "DEFAULT_IDLE_S",
    "IDLE_THRESHOLDS_S",
    "REVERSE_CRITERION",
    "Labeller",
    "Savings",
    "StickyCard",
    "Turn",
    "TurnView",
    "adjacent_pairs",
    "domain_runs",
    "format_duration",
    "format_sticky_card",
    "message_kind",
    "message_usage",
    "nearest_rank",
    "parse_duration",
    "session_lengths",
    "sticky_card",
    "sticky_pairs",
    "sticky_rate",
    "thread_turns",
]

DEFAULT_IDLE_S = 30 * 60.0
"""The idle threshold when none is given: 30 minutes."""
IDLE_THRESHOLDS_S = (5 * 60.0, 30 * 60.0, 120 * 60.0)
"""The thresholds of the sensitivity check: 5, 30 and 120 minutes."""
REVERSE_CRITERION = 0.15
"""Below this ratio stateful patterns rarely pay for their complexity."""
SECONDS_PER_DAY = 86_400.0


@dataclass(frozen=True)
class Turn:
    """One turn of a thread: when it started and the domain that served it."""

    thread_id: str
    ts: float
    """When the turn started, in seconds (any epoch, the same for all turns)."""
    domain: str | None
    """The turn's label; None when nothing labelled it."""


@dataclass(frozen=True)
class TurnView:
    """What a labelling function sees of one turn of a thread."""

    thread_id: str
    index: int
    """The turn's position in its thread, from 0."""
    ts: float
    messages: Sequence[Any]
    """The turn's messages: its human message and everything up to the next one
    (LangChain messages, or the dicts a server sends)."""
    state: Mapping[str, Any]
    """The thread's state values when the turn ended (before the next turn started)."""


Labeller = Callable[[TurnView], "str | None"]


# --------------------------------------------------------------------------- the formula


def adjacent_pairs(turns: Iterable[Turn]) -> list[tuple[Turn, Turn]]:
    """The adjacent pairs of turns, formed inside each thread after ordering it by time."""
    by_thread: dict[str, list[Turn]] = {}
    for turn in turns:
        by_thread.setdefault(turn.thread_id, []).append(turn)
    pairs: list[tuple[Turn, Turn]] = []
    for thread in by_thread.values():
        ordered = sorted(thread, key=lambda t: t.ts)  # stable: equal times keep their order
        pairs.extend(itertools.pairwise(ordered))
    return pairs


def _is_sticky(earlier: Turn, later: Turn, idle_s: float) -> bool:
    return (earlier.domain is not None and earlier.domain == later.domain
            and later.ts - earlier.ts <= idle_s)


def sticky_pairs(turns: Iterable[Turn], idle_s: float = DEFAULT_IDLE_S) -> tuple[int, int]:
    """(sticky pairs, all adjacent pairs) at idle threshold `idle_s` seconds."""
    pairs = adjacent_pairs(turns)
    return sum(_is_sticky(a, b, idle_s) for a, b in pairs), len(pairs)


def sticky_rate(turns: Iterable[Turn], idle_s: float = DEFAULT_IDLE_S) -> float | None:
    """Sticky pairs over all adjacent pairs; None when no thread has two turns."""
    sticky, pairs = sticky_pairs(turns, idle_s)
    return sticky / pairs if pairs else None


def session_lengths(turns: Iterable[Turn]) -> list[int]:
    """The number of turns of each thread, in the order threads first appear."""
    counts: dict[str, int] = {}
    for turn in turns:
        counts[turn.thread_id] = counts.get(turn.thread_id, 0) + 1
    return list(counts.values())


def nearest_rank(values: Sequence[float], quantile: float) -> float | None:
    """The nearest-rank percentile: the smallest value with at least `quantile` of the
    values at or below it; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(quantile * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def domain_runs(turns: Iterable[Turn]) -> list[int]:
    """The lengths of each thread's runs of consecutive same-label turns (gaps ignored; an
    unlabelled turn is a run of its own)."""
    by_thread: dict[str, list[Turn]] = {}
    for turn in turns:
        by_thread.setdefault(turn.thread_id, []).append(turn)
    runs: list[int] = []
    for thread in by_thread.values():
        ordered = sorted(thread, key=lambda t: t.ts)
        length = 0
        previous: Turn | None = None
        for turn in ordered:
            if previous is not None and previous.domain is not None and (
                    turn.domain == previous.domain):
                length += 1
            else:
                if length:
                    runs.append(length)
                length = 1
            previous = turn
        if length:
            runs.append(length)
    return runs


# --------------------------------------------------------------------------- the card


@dataclass(frozen=True)
class Savings:
    """What a stateful pattern could save per day at most (the ratio is an upper bound)."""

    turns_per_day: float
    calls_per_day: float
    """Savable calls per day: turns per day x the ratio."""
    tokens_per_day: float | None = None
    """Savable calls x the average tokens of a call (input plus output), when known."""
    usd_per_day: float | None = None
    """Those tokens at the price given, when known."""
    seconds_per_day: float | None = None
    """Savable calls x the average seconds of a call (serial calls add up), when known."""


@dataclass(frozen=True)
class StickyCard:
    """The measurement card of the repeated-request ratio over a set of threads."""

    threads: int
    turns: int
    pairs: int
    unlabelled_turns: int
    single_turn_share: float | None
    p50_turns: float | None
    p90_turns: float | None
    idle_s: float
    sticky_pairs: int
    rate: float | None
    mean_run_length: float | None
    switch_rate: float | None
    by_threshold: dict[float, float | None]
    """The ratio at each idle threshold of the sensitivity check (seconds -> ratio)."""
    savings: Savings | None
    domains: dict[str, int] = field(default_factory=dict)
    """Turns per label, most used first."""

    @property
    def verdict(self) -> str:
        """What the ratio says about stateful patterns (the reverse criterion)."""
        if self.rate is None:
            return ("no thread has two turns yet: the ratio needs adjacent turns of one "
                    "conversation")
        if self.rate < REVERSE_CRITERION:
            return (f"under {REVERSE_CRITERION:.0%}: stateful patterns (handoffs, skills, a "
                    "stateful router) rarely pay for their complexity here; subagents' fixed "
                    "cost and isolation are the better default")
        return (f"{self.rate:.0%} of adjacent turns stay in their domain: a stateful pattern "
                "could skip re-entering it that often (an upper bound; check it against "
                "real traffic before switching)")


def sticky_card(
    turns: Iterable[Turn],
    *,
    idle_s: float = DEFAULT_IDLE_S,
    thresholds: Sequence[float] = IDLE_THRESHOLDS_S,
    turns_per_day: float | None = None,
    tokens_per_call: tuple[float, float] | None = None,
    price: Price | None = None,
    seconds_per_call: float | None = None,
) -> StickyCard:
    """The measurement card of `turns` at idle threshold `idle_s` seconds.

    `turns_per_day` defaults to the turns over the days they span (at least one day);
    `tokens_per_call` is the average (input, output) tokens of a model call, `price` its
    price and `seconds_per_call` its latency, each used for the savings when given.
    """
    turns = list(turns)
    pairs = adjacent_pairs(turns)
    sticky = sum(_is_sticky(a, b, idle_s) for a, b in pairs)
    rate = sticky / len(pairs) if pairs else None
    switches = sum(a.domain is not None and b.domain is not None and a.domain != b.domain
                   for a, b in pairs)
    lengths = session_lengths(turns)
    runs = domain_runs(turns)
    domains: dict[str, int] = {}
    for turn in turns:
        if turn.domain is not None:
            domains[turn.domain] = domains.get(turn.domain, 0) + 1
    savings = None
    if turns and rate is not None:
        if turns_per_day is None:
            span = max(t.ts for t in turns) - min(t.ts for t in turns)
            turns_per_day = len(turns) / max(1.0, span / SECONDS_PER_DAY)
        calls = turns_per_day * rate
        tokens = usd = seconds = None
        if tokens_per_call is not None:
            tokens = calls * (tokens_per_call[0] + tokens_per_call[1])
            if price is not None:
                usd = (calls * tokens_per_call[0] * price.input
                       + calls * tokens_per_call[1] * price.output) / 1_000_000
        if seconds_per_call is not None:
            seconds = calls * seconds_per_call
        savings = Savings(turns_per_day, calls, tokens, usd, seconds)
    return StickyCard(
        threads=len(lengths),
        turns=len(turns),
        pairs=len(pairs),
        unlabelled_turns=sum(t.domain is None for t in turns),
        single_turn_share=(sum(n == 1 for n in lengths) / len(lengths)) if lengths else None,
        p50_turns=nearest_rank(lengths, 0.5),
        p90_turns=nearest_rank(lengths, 0.9),
        idle_s=idle_s,
        sticky_pairs=sticky,
        rate=rate,
        mean_run_length=sum(runs) / len(runs) if runs else None,
        switch_rate=switches / len(pairs) if pairs else None,
        by_threshold={t: (sum(_is_sticky(a, b, t) for a, b in pairs) / len(pairs)
                          if pairs else None) for t in thresholds},
        savings=savings,
        domains=dict(sorted(domains.items(), key=lambda item: (-item[1], item[0]))),
    )


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _number(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.{digits}f}"


def _count(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


def format_sticky_card(card: StickyCard) -> str:
    """The card as plain text: the five numbers, the savings and the verdict."""
    idle = format_duration(card.idle_s)
    lines = [
        f"repeated-request ratio over {_count(card.threads, 'thread')}, "
        f"{_count(card.turns, 'turn')}, {_count(card.pairs, 'adjacent pair')} "
        f"(idle threshold {idle})",
        f"  sessions            single-turn {_percent(card.single_turn_share)}, "
        f"P50 {_number(card.p50_turns)} turns, P90 {_number(card.p90_turns)} turns",
        f"  sticky rate         {_percent(card.rate)} ({card.sticky_pairs} of {card.pairs} "
        "pairs stay in their domain)",
        f"  same-domain runs    mean {_number(card.mean_run_length, 2)} turns",
        f"  switch rate         {_percent(card.switch_rate)}",
        "  by idle threshold   " + ", ".join(
            f"{format_duration(t)} {_percent(r)}" for t, r in card.by_threshold.items()),
    ]
    if card.unlabelled_turns:
        lines.append(f"  unlabelled turns    {card.unlabelled_turns} (never sticky; no subagent, "
                     "skill or handoff named their domain)")
    if card.domains:
        lines.append("  domains             " + ", ".join(
            f"{name} {count}" for name, count in card.domains.items()))
    if card.savings is not None:
        s = card.savings
        parts = [f"{_number(s.calls_per_day)} savable calls/day ({_number(s.turns_per_day)} "
                 f"turns/day x {_percent(card.rate)})"]
        if s.tokens_per_day is not None:
            parts.append(f"{_number(s.tokens_per_day, 0)} tokens/day")
        if s.usd_per_day is not None:
            parts.append(f"${s.usd_per_day:,.4f}/day")
        if s.seconds_per_day is not None:
            parts.append(f"{s.seconds_per_day:,.{1 if s.seconds_per_day >= 10 else 3}f} s of "
                         "model time/day")
        lines.append("  at most             " + ", ".join(parts))
    lines.append(textwrap.fill(card.verdict, width=96, initial_indent="  verdict             ",
                               subsequent_indent=" " * 22))
    return "\n".join(lines)


# --------------------------------------------------------------------------- durations

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h|d)?\s*$", re.IGNORECASE)
_UNITS = {"s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86_400.0}


def parse_duration(text: str) -> float:
    """Seconds in `text`: `90s`, `30m`, `2h`, `1d`; a bare number is minutes."""
    match = _DURATION.match(text)
    if match is None:
        raise ValueError(f"{text!r} is not a duration; write e.g. 90s, 30m, 2h or 1d")
    return float(match.group(1)) * _UNITS[(match.group(2) or "m").lower()]


def format_duration(seconds: float) -> str:
    """`seconds` in the largest whole unit: `30m`, `2h`, `90s`."""
    for unit, size in (("d", 86_400.0), ("h", 3600.0), ("m", 60.0)):
        if seconds >= size and (seconds / size).is_integer():
            return f"{int(seconds / size)}{unit}"
    return f"{seconds:g}s"


# --------------------------------------------------------------------------- threads


def _get(message: Any, key: str) -> Any:
    return message.get(key) if isinstance(message, Mapping) else getattr(message, key, None)


_ROLES = {"user": "human", "assistant": "ai"}


def message_kind(message: Any) -> str:
    """`human`, `ai`, `tool`, `system`... of a LangChain message or a message dict."""
    kind = _get(message, "type") or _get(message, "role") or ""
    return _ROLES.get(str(kind), str(kind))


def _key(message: Any, position: int) -> Any:
    found = _get(message, "id")
    return found if found else ("#", position, str(_get(message, "content")))


def thread_turns(
    thread_id: str,
    snapshots: Iterable[tuple[float, Mapping[str, Any]]],
    label: Labeller,
) -> list[Turn]:
    """The turns of one thread from its checkpoints, each labelled by `label`.

    `snapshots` are the thread's states as `(time, values)`, in any order. A turn is a human
    message of the newest state's `messages`; it started when the first state holding it
    was saved, and it ended with the last state before the next turn's first.
    """
    ordered = sorted(snapshots, key=lambda s: s[0])
    if not ordered:
        return []
    messages = list(ordered[-1][1].get("messages") or [])
    humans = [(i, _key(m, i)) for i, m in enumerate(messages) if message_kind(m) == "human"]
    first_seen: dict[Any, int] = {}
    wanted = {key for _, key in humans}
    for index, (_, values) in enumerate(ordered):
        if len(first_seen) == len(wanted):
            break
        for position, message in enumerate(values.get("messages") or []):
            key = _key(message, position)
            if key in wanted and key not in first_seen:
                first_seen[key] = index
    turns: list[Turn] = []
    for n, (position, key) in enumerate(humans):
        start = first_seen.get(key, len(ordered) - 1)
        if n + 1 < len(humans):
            end_position = humans[n + 1][0]
            following = first_seen.get(humans[n + 1][1], len(ordered) - 1)
            end = max(start, following - 1)
        else:
            end_position = len(messages)
            end = len(ordered) - 1
        view = TurnView(thread_id=thread_id, index=n, ts=ordered[start][0],
                        messages=messages[position:end_position], state=ordered[end][1])
        turns.append(Turn(thread_id, view.ts, label(view)))
    return turns


def message_usage(messages: Iterable[Any]) -> tuple[int, int, int]:
    """(model calls, input tokens, output tokens) of the AI messages that carry usage."""
    calls = tokens_in = tokens_out = 0
    for message in messages:
        usage = _get(message, "usage_metadata")
        if isinstance(usage, Mapping) and message_kind(message) == "ai":
            calls += 1
            tokens_in += int(usage.get("input_tokens") or 0)
            tokens_out += int(usage.get("output_tokens") or 0)
    return calls, tokens_in, tokens_out
