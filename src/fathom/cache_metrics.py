"""The prompt-cache prefix reuse rate: how much of each model request repeats the previous one.

Provider prompt caches (Anthropic's cache breakpoints, OpenAI's and DeepSeek's automatic
prefix caching) serve the part of a request that repeats the start of an earlier request
from cache. An agent loop gets the most from them when each request extends the previous
one byte for byte; a system prompt or tool list that changes, or rewritten history, cuts
the cached prefix where the change is.

For each agent, and each of its requests after the first, the prefix reuse rate is the length of
the common prefix of the request and the agent's previous request, as a share of the
previous request: 1.0 when the request extends the previous one (an append-only loop),
about the share before the change when something early changed. Lengths are in characters
of a canonical rendering of the request (system prompt, tool schemas, then messages, as
compact JSON with sorted keys: the same rendering as
`fathom.testing.RecordedRequest.canonical_json()`), not counting the `]}]` that closes
every request (appending a message necessarily moves it). `cached_share` is the same prefix
as a share of the later request: what a provider could serve from cache. Token figures are
estimates, a token per four characters.

Live: pass a `PrefixRecorder` as a callback (as `fathom.usage.AgentUsage`), then
`prefix_reuse_summary(recorder)`. Recorded: `prefix_reuse_rates([r.canonical_json() for r in
model.requests])`. `fathom serve` records every run this way and adds the figures to the
thread's `fathom_prefix` metadata (`merge_metadata`), which the web page shows.

This is not the "sticky rate" of the multi-agent patterns' measurements (how often a turn
stays in its previous turn's domain: `fathom.measure.sticky`). These functions were once
named `sticky_rate`, `sticky_rates` and `sticky_summary`; those names remain as aliases of
`prefix_reuse_rate`, `prefix_reuse_rates` and `prefix_reuse_summary`.

Layer: core, the lowest; it must not import any other layer of fathom.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    SystemMessage,
    ToolMessage,
    message_chunk_to_message,
)

from fathom.usage import agent_name

__all__ = [
    "CLOSING",
    "PREFIX_METADATA_KEY",
    "AgentPrefix",
    "PrefixRecorder",
    "common_prefix_length",
    "merge_metadata",
    "merged",
    "prefix_reuse_rate",
    "prefix_reuse_rates",
    "prefix_reuse_summary",
    "request_pieces",
    "sticky_rate",
    "sticky_rates",
    "sticky_summary",
]

CLOSING = "]}]"
"""How every canonical request ends; not counted in the earlier request's length."""

CHARS_PER_TOKEN = 4

PREFIX_METADATA_KEY = "fathom_prefix"
"""Thread metadata key holding `PrefixRecorder.as_metadata()` (read by the web page)."""


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                      default=str)


def _render(message: BaseMessage) -> str:
    plain = message_chunk_to_message(message)  # pyright: ignore[reportArgumentType]
    calls = ([{"name": c["name"], "args": c["args"], "id": c.get("id")} for c in plain.tool_calls]
             if isinstance(plain, AIMessage) else [])
    return _dumps({
        "type": plain.type,
        "content": plain.content,
        "tool_calls": calls,
        "tool_call_id": plain.tool_call_id if isinstance(plain, ToolMessage) else None,
    })


_RECENT_HEADS: list[tuple[str | None, list[Any], str]] = []
"""The last few rendered heads: every run of one agent starts with the same system prompt
and tools, and comparing them is much cheaper than rendering them again."""
_KEPT_HEADS = 8


def _head(system: str | None, tools: Sequence[Any]) -> str:
    tools = list(tools)
    for known_system, known_tools, head in _RECENT_HEADS:
        if known_system == system and known_tools == tools:
            return head
    rendered_tools = _dumps(tools)
    head = f'[{{"system":{_dumps(system)}}},{{"tools":{rendered_tools}}},{{"messages":['
    # the key is a copy made from the rendering: a caller changing its tool dicts later
    # cannot change it (tools that are not plain JSON never compare equal to it: a miss)
    key = (system, json.loads(rendered_tools), head)
    _RECENT_HEADS[:] = [key, *_RECENT_HEADS[: _KEPT_HEADS - 1]]
    return head


def request_pieces(
    messages: Sequence[BaseMessage], tools: Sequence[Any] = (),
    rendered: Mapping[int, tuple[BaseMessage, str]] | None = None,
) -> list[str]:
    """A request's canonical rendering in pieces (head, messages, commas, closing).

    `"".join(...)` is the canonical JSON. `rendered` (id -> (message, piece)) reuses pieces
    of messages rendered before, so a long history is not rendered again on every request.
    """
    system = None
    rest = list(messages)
    if rest and isinstance(rest[0], SystemMessage):
        system, rest = str(rest[0].text), rest[1:]
    pieces = [_head(system, tools)]
    for index, message in enumerate(rest):
        if index:
            pieces.append(",")
        known = rendered.get(id(message)) if rendered else None
        pieces.append(known[1] if known is not None and known[0] is message else _render(message))
    pieces.append(CLOSING)
    return pieces


def common_prefix_length(a: str, b: str) -> int:
    """The number of leading characters `a` and `b` share."""
    limit = min(len(a), len(b))
    if a[:limit] == b[:limit]:
        return limit
    low, high = 0, limit  # a[:low] == b[:low] and a[:high] != b[:high]
    while high - low > 1:
        middle = (low + high) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle
    return low


def _joined_pieces(rendered: Sequence[str]) -> list[str]:
    """Rendered messages as the pieces after the head: commas between, the closing last."""
    pieces: list[str] = []
    for index, piece in enumerate(rendered):
        if index:
            pieces.append(",")
        pieces.append(piece)
    pieces.append(CLOSING)
    return pieces


def _pieces_prefix(earlier: Sequence[str], later: Sequence[str]) -> int:
    """Common prefix (characters) of two piece lists' concatenations, piece by piece."""
    total = 0
    index = 0
    for a, b in zip(earlier, later, strict=False):
        if a is not b and a != b:
            break
        total += len(a)
        index += 1
    if index < len(earlier) and index < len(later):
        total += common_prefix_length("".join(earlier[index:]), "".join(later[index:]))
    return total


def _body_length(pieces: Sequence[str]) -> int:
    length = sum(len(p) for p in pieces)
    return length - len(CLOSING) if pieces and pieces[-1].endswith(CLOSING) else length


def prefix_reuse_rate(earlier: str | Sequence[str], later: str | Sequence[str]) -> float:
    """The common prefix of two canonical requests as a share of `earlier` (1.0 = extends it)."""
    a = [earlier] if isinstance(earlier, str) else list(earlier)
    b = [later] if isinstance(later, str) else list(later)
    body = _body_length(a)
    return min(1.0, _pieces_prefix(a, b) / body) if body > 0 else 1.0


def prefix_reuse_rates(requests: Sequence[str | Sequence[str]]) -> list[float]:
    """The prefix reuse rate of each request after the first (one agent's requests, in
    order)."""
    return [prefix_reuse_rate(a, b) for a, b in itertools.pairwise(requests)]


@dataclass
class AgentPrefix:
    """One agent's requests and how much each repeated the previous one's prefix."""

    requests: int = 0
    rates: list[float] = field(default_factory=list)
    """The prefix reuse rate of each request after the first."""
    prefix_chars: int = 0
    """Characters of all requests after the first that repeat the previous request."""
    input_chars: int = 0
    """Characters of all requests after the first."""

    @property
    def mean(self) -> float | None:
        """The mean prefix reuse rate (None before a second request)."""
        return sum(self.rates) / len(self.rates) if self.rates else None

    @property
    def minimum(self) -> float | None:
        """The lowest prefix reuse rate (None before a second request)."""
        return min(self.rates) if self.rates else None

    @property
    def cached_share(self) -> float | None:
        """Repeated characters as a share of all characters sent after the first request."""
        return self.prefix_chars / self.input_chars if self.input_chars else None


@dataclass
class _Last:
    """An agent's previous request: its head, messages, their renderings and total length."""

    head: str
    messages: list[BaseMessage]
    rendered: list[str]
    length: int
    system: str | None
    tools: list[Any]


def _length(head: str, rendered: Sequence[str]) -> int:
    """Length of the canonical request made of `head`, `rendered` messages and the closing."""
    return len(head) + sum(len(r) for r in rendered) + max(len(rendered) - 1, 0) + len(CLOSING)


class PrefixRecorder(BaseCallbackHandler):
    """A callback handler that measures each agent's prefix reuse rate as its calls start.

    Requests are told apart by agent with the `lc_agent_name` of the call's metadata (the
    main agent's `name`, or the subagent's). Each request's tools are read from the call's
    invocation parameters. When a request repeats the agent's previous messages (the same
    objects, as LangGraph passes them) only the new messages are rendered, so the cost of a
    call grows with what changed, not with the history.
    """

    run_inline = True

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[str, _Last] = {}
        self._agents: dict[str, AgentPrefix] = {}

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        invocation_params: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        name = agent_name(kwargs.get("metadata"))
        request = list(messages[0]) if messages else []
        tools = (invocation_params or {}).get("tools") or []
        system = None
        if request and isinstance(request[0], SystemMessage):
            system, request = str(request[0].text), request[1:]
        tools = list(tools)
        with self._lock:
            last = self._last.get(name)
        same_head = last is not None and system == last.system and tools == last.tools
        head = last.head if last is not None and same_head else _head(system, tools)
        kept = len(last.messages) if last is not None else 0
        length = 0
        if (last is not None and same_head and len(request) >= kept
                and request[:kept] == last.messages):  # C-speed; same objects compare at once
            new = [_render(m) for m in request[kept:]]
            rendered = [*last.rendered, *new]
            commas = len(new) if kept else max(len(new) - 1, 0)
            length = last.length + sum(len(r) for r in new) + commas
            prefix: int | None = last.length - len(CLOSING)  # all of it: it extends it
        else:
            known = ({id(m): r for m, r in zip(last.messages, last.rendered, strict=True)}
                     if last is not None else {})
            rendered = [known[id(m)] if id(m) in known else _render(m) for m in request]
            prefix = None
            if last is not None:
                earlier = [last.head, *_joined_pieces(last.rendered)]
                prefix = _pieces_prefix(earlier, [head, *_joined_pieces(rendered)])
            length = _length(head, rendered)
        with self._lock:
            agent = self._agents.setdefault(name, AgentPrefix())
            agent.requests += 1
            if last is not None and prefix is not None:
                body = last.length - len(CLOSING)
                agent.rates.append(min(1.0, prefix / body) if body > 0 else 1.0)
                agent.prefix_chars += min(prefix, body)
                agent.input_chars += length
            self._last[name] = _Last(head, request, rendered, length, system, tools)

    def agents(self) -> dict[str, AgentPrefix]:
        """A copy of the figures so far, by agent name, in the order agents first called."""
        with self._lock:
            return {name: AgentPrefix(a.requests, list(a.rates), a.prefix_chars, a.input_chars)
                    for name, a in self._agents.items()}

    def as_metadata(self) -> dict[str, dict[str, Any]]:
        """JSON-ready figures per agent (`requests`, `pairs`, `mean`, `min`, `cached_share`)."""
        return {name: {"requests": a.requests, "pairs": len(a.rates), "mean": a.mean,
                       "min": a.minimum, "cached_share": a.cached_share}
                for name, a in self.agents().items()}


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _row(name: str, requests: int, mean: float | None, low: float | None,
         share: float | None, prefix_chars: int) -> tuple[str, ...]:
    return (name, str(requests), _percent(mean), _percent(low), _percent(share),
            f"{prefix_chars // CHARS_PER_TOKEN:,}")


def prefix_reuse_summary(
    source: PrefixRecorder | Mapping[str, AgentPrefix] | Mapping[str, Mapping[str, Any]],
) -> str:
    """A plain-text table: per agent, requests, mean and lowest reuse rate, cached share.

    `source` is a recorder, its `agents()`, or a thread's `fathom_prefix` metadata (what
    `fathom serve` recorded). An agent with a single request has no rate yet (`-`).
    """
    agents = source.agents() if isinstance(source, PrefixRecorder) else dict(source)
    rows = []
    for name, a in agents.items():
        if isinstance(a, AgentPrefix):
            rows.append(_row(name, a.requests, a.mean, a.minimum, a.cached_share,
                             a.prefix_chars))
        else:  # recorded metadata
            rows.append(_row(name, int(a.get("requests", 0)), a.get("mean"), a.get("min"),
                             a.get("cached_share"), int(a.get("prefix_chars", 0))))
    header = ("agent", "requests", "reuse mean", "reuse min", "cached share", "~tokens reused")
    width = max(len(header[0]), *(len(r[0]) for r in rows)) if rows else len(header[0])
    line = f"{header[0]:<{width}}  " + "  ".join(header[1:])
    lines = ["prompt-cache prefix (reuse rate: share of the previous request repeated)",
             line, "-" * len(line)]
    for row in rows:
        lines.append(f"{row[0]:<{width}}  " + "  ".join(
            f"{value:>{len(h)}}" for value, h in zip(row[1:], header[1:], strict=True)))
    if not rows:
        lines.append("(no model requests yet)")
    return "\n".join(lines)


def merged(recorders: Iterable[PrefixRecorder]) -> dict[str, AgentPrefix]:
    """Several recorders' figures added up by agent name (e.g. one per turn of a session)."""
    total: dict[str, AgentPrefix] = {}
    for recorder in recorders:
        for name, a in recorder.agents().items():
            into = total.setdefault(name, AgentPrefix())
            into.requests += a.requests
            into.rates += a.rates
            into.prefix_chars += a.prefix_chars
            into.input_chars += a.input_chars
    return total


def merge_metadata(
    before: Mapping[str, Any] | None, recorder: PrefixRecorder
) -> dict[str, dict[str, Any]]:
    """`before` (a thread's `fathom_prefix` metadata) plus what `recorder` saw in one run.

    Per agent it keeps sums (`requests`, `pairs`, `rate_sum`, `prefix_chars`,
    `input_chars`) so runs add up exactly, and the derived `mean`, `min` and
    `cached_share`. Pairs are counted within a run: a run's first request is not compared
    with the previous run's last.
    """
    merged_figures: dict[str, dict[str, Any]] = {
        name: dict(entry) for name, entry in (before or {}).items() if isinstance(entry, Mapping)
    }
    for name, a in recorder.agents().items():
        entry = merged_figures.setdefault(name, {})
        pairs = int(entry.get("pairs", 0)) + len(a.rates)
        rate_sum = float(entry.get("rate_sum", 0.0)) + sum(a.rates)
        prefix_chars = int(entry.get("prefix_chars", 0)) + a.prefix_chars
        input_chars = int(entry.get("input_chars", 0)) + a.input_chars
        lows = [v for v in (entry.get("min"), a.minimum) if isinstance(v, int | float)]
        entry.update(
            requests=int(entry.get("requests", 0)) + a.requests,
            pairs=pairs, rate_sum=rate_sum, prefix_chars=prefix_chars, input_chars=input_chars,
            mean=rate_sum / pairs if pairs else None,
            min=min(lows) if lows else None,
            cached_share=prefix_chars / input_chars if input_chars else None,
        )
    return merged_figures


sticky_rate = prefix_reuse_rate
"""The old name of `prefix_reuse_rate` (kept as an alias)."""
sticky_rates = prefix_reuse_rates
"""The old name of `prefix_reuse_rates` (kept as an alias)."""
sticky_summary = prefix_reuse_summary
"""The old name of `prefix_reuse_summary` (kept as an alias)."""
