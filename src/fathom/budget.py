"""Budgets: caps on what a thread's agent tree may spend, and the account that keeps them.

`Budget(max_tokens=..., max_usd=..., max_wall_s=..., max_model_calls=...)` is what
`create_deep_agent(budget=...)` takes. While a run of such an agent goes, one
`BudgetAccount` holds what the whole tree spent: the main agent, its `task` subagents
(parallel ones included), the subagents an `eval` starts, and the async subagents whose
usage their servers reported back. The account is what the agents' budget middleware
(`fathom.middleware.budget`) asks before every model call:

- `admit` answers a `Ticket` (the call may start) or the name of the cap that is reached
  (it may not). A call also waits while the calls in flight, at the size of the largest call
  so far, could carry the tree past a cap: the tree then ends within one call of the cap
  instead of one call per parallel subagent.
- The account is a LangChain callback handler. While an agent of the tree runs a model or
  tool call, the account is the current one (`active_account`), and LangChain adds it to the
  callbacks of every model call made below that point (`register_configure_hook`), so a
  summary call or a compiled subagent's call is counted too, not only the agents' own.

Spend is per thread, not per run: the main agent writes `snapshot()` into its state after
each model call (the `fathom_budget` channel), and a later run on the thread starts from
it. A run with a raised budget therefore continues where the last one stopped; one with the
same budget stops before its first model call.

Layer: core; it imports `fathom.errors`, `fathom.pricing` and `fathom.usage` only.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import math
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage
from langchain_core.outputs import LLMResult
from langchain_core.tracers.context import register_configure_hook

from fathom.errors import FathomError
from fathom.pricing import Price, find_price, model_key
from fathom.usage import UNNAMED_AGENT, AgentTotals, ai_messages

__all__ = [
    "BUDGET_KEY",
    "CAPS",
    "GRANT_KEY",
    "Budget",
    "BudgetAccount",
    "BudgetError",
    "Spend",
    "Ticket",
    "active_account",
    "budget_summary",
    "cap_label",
    "current_grant",
    "merge_budget_state",
]

BUDGET_KEY = "fathom_budget"
"""The state channel that holds a thread's spend (`BudgetAccount.snapshot()`), and the
`config["configurable"]` key whose mapping of caps replaces the agent's for one run."""

GRANT_KEY = "fathom_budget_grant"
"""Run metadata key: what is left of a parent's budget when it started this run as an
async subagent (`current_grant`). The run may spend at most that much more."""

CAPS = ("max_model_calls", "max_tokens", "max_usd", "max_wall_s")
"""The caps a `Budget` may set, in the order a reached one is reported."""

_LABELS = {
    "max_model_calls": "model-call cap",
    "max_tokens": "token cap",
    "max_usd": "cost cap",
    "max_wall_s": "time cap",
}


class BudgetError(FathomError, ValueError):
    """A budget that cannot be what its author meant (a negative cap, an unknown key)."""


def _price_of(value: Any, model: str) -> Price:
    if isinstance(value, Price):
        return value
    if isinstance(value, Mapping) and set(value) == {"input", "output"}:
        entry = (value["input"], value["output"])
    elif isinstance(value, tuple | list) and len(value) == 2:
        entry = (value[0], value[1])
    else:
        raise BudgetError(
            f"Budget prices[{model!r}] is {value!r}; give (input, output) or "
            '{"input": ..., "output": ...} in USD per million tokens, or a fathom.pricing.Price.'
        )
    for number in entry:
        if isinstance(number, bool) or not isinstance(number, int | float) or number < 0:
            raise BudgetError(f"Budget prices[{model!r}]: prices must be numbers >= 0 (USD "
                              "per million tokens).")
    return Price(float(entry[0]), float(entry[1]), source="Budget(prices=...)")


@dataclass(frozen=True)
class Budget:
    """Caps on what one thread's agent tree may spend; `None` leaves a cap off.

    Args:
        max_tokens: Input plus output tokens of every model call in the tree.
        max_usd: Estimated US dollars, from the price of each call's model (`prices`, then
            the table of `fathom.pricing`).
        max_wall_s: Seconds the thread's runs may take, added up over its runs.
        max_model_calls: Model calls in the tree.
        prices: "provider:model" -> `(input, output)` USD per million tokens (or a
            `{"input", "output"}` mapping, or a `fathom.pricing.Price`); wins over the
            default table.

    A cap is checked before each model call starts: at the cap, no new call starts, the
    calls in flight finish, and the run ends with a message that says which cap was
    reached. `Budget()` with no cap counts without stopping, and lets a run's
    `config["configurable"]["fathom_budget"]` set caps.
    """

    max_tokens: int | None = None
    max_usd: float | None = None
    max_wall_s: float | None = None
    max_model_calls: int | None = None
    prices: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        for cap in CAPS:
            value = getattr(self, cap)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or (
                isinstance(value, float) and math.isnan(value)
            ) or value < 0:
                raise BudgetError(f"Budget {cap}={value!r}; a cap is a number >= 0, or None "
                                  "for no cap.")
            if cap in ("max_tokens", "max_model_calls") and not float(value).is_integer():
                raise BudgetError(f"Budget {cap}={value!r}; it counts whole {cap[4:]}.")
        prices = {str(model): _price_of(value, str(model))
                  for model, value in dict(self.prices or {}).items()}
        object.__setattr__(self, "prices", prices)

    @classmethod
    def from_mapping(
        cls, data: Mapping[str, Any] | Budget, *, prices: Mapping[str, Any] | None = None,
        where: str = "budget",
    ) -> Budget:
        """A budget from a mapping of caps (a `fathom.toml` `[budget]` table, a run's
        `configurable`); `where` names it in the error for an unknown key or a bad value."""
        if isinstance(data, Budget):
            return data
        if not isinstance(data, Mapping):
            raise BudgetError(f"{where} must be a mapping of caps ({', '.join(CAPS)}), not "
                              f"{type(data).__name__}.")
        unknown = sorted(str(key) for key in data if key not in (*CAPS, "prices"))
        if unknown:
            raise BudgetError(f"{where}: unknown key(s) {', '.join(unknown)}; the caps are "
                              f"{', '.join(CAPS)}.")
        caps = {key: data[key] for key in CAPS if key in data}
        try:
            return cls(**caps, prices={**dict(prices or {}), **dict(data.get("prices") or {})})
        except BudgetError as error:
            raise BudgetError(f"{where}: {error}") from None

    def caps(self) -> dict[str, float]:
        """The caps that are set, by name."""
        return {cap: getattr(self, cap) for cap in CAPS if getattr(self, cap) is not None}

    def merged(
        self, overrides: Mapping[str, Any] | Budget | None, *, where: str = "budget"
    ) -> Budget:
        """This budget with `overrides`' caps instead of its own (a key given as `None`
        turns that cap off); its prices join this budget's."""
        if not overrides:
            return self
        if isinstance(overrides, Budget):
            overrides = {**{cap: getattr(overrides, cap) for cap in CAPS},
                         "prices": overrides.prices}
        other = Budget.from_mapping(overrides, where=where)
        caps = {**self.caps(), **{cap: overrides[cap] for cap in CAPS if cap in overrides}}
        return Budget(**caps, prices={**self.prices, **other.prices})

    def price(self, model: str | None) -> Price | None:
        """The price of `model` ("provider:model"): `prices`, then the default table."""
        return find_price(model, self.prices, source="Budget(prices=...)") if model else None


@dataclass
class Spend(AgentTotals):
    """What some model calls added up to, and what they cost."""

    usd: float = 0.0

    def add(self, other: AgentTotals) -> None:
        """Count `other` into this (its cost too, when it is a `Spend`)."""
        super().add(other)
        if isinstance(other, Spend):
            self.usd += other.usd

    def to_dict(self) -> dict[str, Any]:
        """JSON-able figures, as the state channel keeps them."""
        return {"calls": self.calls, "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens, "usd": round(self.usd, 8)}

    @classmethod
    def from_dict(cls, data: Any) -> Spend:
        """The figures of `to_dict` (missing or bad ones count as zero)."""
        if not isinstance(data, Mapping):
            return cls()
        out = cls()
        for item in fields(cls):
            value = data.get(item.name)
            if isinstance(value, int | float) and not isinstance(value, bool):
                setattr(out, item.name, type(getattr(out, item.name))(value))
        return out

    def maximum(self, other: Spend) -> Spend:
        """Figure by figure the larger of this and `other` (two snapshots of one total)."""
        return Spend(max(self.calls, other.calls), max(self.input_tokens, other.input_tokens),
                     max(self.output_tokens, other.output_tokens), max(self.usd, other.usd))


@dataclass
class Ticket:
    """One model call that `BudgetAccount.admit` let start; `release` it when it ends."""

    account: BudgetAccount
    claimed: bool = False
    """Whether the model call it was issued for has started (and was counted by it)."""


_ACTIVE: contextvars.ContextVar[BudgetAccount | None] = contextvars.ContextVar(
    "fathom_budget_account", default=None
)
_TICKET: contextvars.ContextVar[Ticket | None] = contextvars.ContextVar(
    "fathom_budget_ticket", default=None
)
# every callback manager configured while an account is active gets it as a handler
register_configure_hook(_ACTIVE, inheritable=True)


def active_account() -> BudgetAccount | None:
    """The account of the agent tree this code runs in, or `None` (no budget)."""
    return _ACTIVE.get()


def current_grant() -> dict[str, float] | None:
    """What is left of the active budget, for a run this code starts elsewhere (an async
    subagent): `{cap: remaining}` for the caps set, or `None` without a budget or caps."""
    account = _ACTIVE.get()
    return (account.remaining() or None) if account is not None else None


def _max_figures(old: Any, new: Any) -> dict[str, Any]:
    merged = Spend.from_dict(old).maximum(Spend.from_dict(new)).to_dict()
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        for key in ("agent", "wall_s"):
            if key in new or key in old:
                merged[key] = new.get(key, old.get(key)) if key == "agent" else max(
                    float(old.get(key) or 0), float(new.get(key) or 0))
    return merged


def _merge_named(old: Any, new: Any) -> dict[str, Any]:
    old = old if isinstance(old, Mapping) else {}
    new = new if isinstance(new, Mapping) else {}
    return {name: _max_figures(old.get(name), new.get(name)) for name in {**old, **new}}


def merge_budget_state(old: Any, new: Any) -> Any:
    """The reducer of the `fathom_budget` channel: snapshots of one growing total, so each
    figure keeps the larger value (parallel writers in one step agree); the caps and the
    reached cap are the newer snapshot's. `None` clears the channel."""
    if new is None or not isinstance(old, Mapping):
        return new
    if not isinstance(new, Mapping):
        return old
    spent = _max_figures(old.get("spent"), new.get("spent"))
    spent["total_tokens"] = spent["input_tokens"] + spent["output_tokens"]
    return {
        **old,
        **new,
        "spent": spent,
        "agents": _merge_named(old.get("agents"), new.get("agents")),
        "tasks": _merge_named(old.get("tasks"), new.get("tasks")),
        "unpriced": sorted({*(old.get("unpriced") or ()), *(new.get("unpriced") or ())}),
    }


class BudgetAccount(BaseCallbackHandler):
    """What one thread's agent tree spent, against its budget; safe across threads and
    event loops.

    Args:
        budget: The caps and prices.
        prior: A `snapshot()` from the thread's state: what earlier runs spent.
        task_model: The "provider:model" whose price prices async subagent tasks (their
            servers report tokens, not models).
    """

    run_inline = True  # counted in the caller's thread, before the call returns
    raise_error = False

    def __init__(
        self, budget: Budget, prior: Mapping[str, Any] | None = None,
        task_model: str | None = None,
    ) -> None:
        super().__init__()
        self.budget = budget
        self.task_model = task_model
        self._cond = threading.Condition()
        self._own = Spend()
        self._agents: dict[str, Spend] = {}
        self._tasks: dict[str, tuple[str, Spend]] = {}
        self._running: dict[UUID, tuple[str, str | None]] = {}
        self._inflight: list[Ticket] = []
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._largest_tokens = 0
        self._largest_usd = 0.0
        self._unpriced: set[str] = set()
        self._tools: Counter[str] = Counter()
        self._run_calls = 0
        self._wall_before = 0.0
        self._run_started = self._run_last = time.monotonic()
        self._run: Any = None
        self.reached: str | None = None
        """The cap that stopped a model call in this run, if one did."""
        if prior:
            self.load(prior)

    # -- runs and state -------------------------------------------------------------------

    def load(self, snapshot: Mapping[str, Any]) -> None:
        """Take what a `snapshot()` says was spent, where it says more than this account."""
        with self._cond:
            for task_id, figures in _mapping(snapshot.get("tasks")).items():
                name, known = self._tasks.get(str(task_id), ("", Spend()))
                agent = str(_mapping(figures).get("agent") or name or "async task")
                self._tasks[str(task_id)] = (agent, known.maximum(Spend.from_dict(figures)))
            spent = Spend.from_dict(snapshot.get("spent"))
            for _, figures in self._tasks.values():
                spent = Spend(spent.calls - figures.calls,
                              spent.input_tokens - figures.input_tokens,
                              spent.output_tokens - figures.output_tokens,
                              spent.usd - figures.usd)
            self._own = self._own.maximum(spent)
            for name, figures in _mapping(snapshot.get("agents")).items():
                self._agents[str(name)] = self._agents.get(str(name), Spend()).maximum(
                    Spend.from_dict(figures))
            wall = _mapping(snapshot.get("spent")).get("wall_s")
            if isinstance(wall, int | float) and wall > self._wall_locked():
                self._wall_before += float(wall) - self._wall_locked()
            self._unpriced |= {str(m) for m in snapshot.get("unpriced") or ()}

    def begin_run(self, run: Any, budget: Budget | None = None) -> bool:
        """Mark the start of run `run` (any object that stays the same for one run): the
        clock counts from now, the tool tally starts over, the caps become `budget`'s.
        Returns whether `run` is new to this account."""
        with self._cond:
            if budget is not None:
                self.budget = budget
            if run is self._run:
                return False
            now = time.monotonic()
            self._wall_before += self._run_last - self._run_started
            self._run_started = self._run_last = now
            self._run = run
            self._tools.clear()
            self._run_calls = 0
            self.reached = None
            return True

    def snapshot(self) -> dict[str, Any]:
        """What the thread spent so far, JSON-able, as its `fathom_budget` channel keeps it:
        `spent` (the whole tree: calls, tokens, usd, wall_s), `agents` (in-process agents by
        name), `tasks` (async subagent tasks by id), `limits` (the caps), `reached`."""
        with self._cond:
            spent = self._spent_locked()
            figures = {**spent.to_dict(), "total_tokens": spent.total_tokens,
                       "wall_s": round(self._wall_locked(), 3)}
            return {
                "spent": figures,
                "limits": dict(self.budget.caps()),
                "reached": self.reached,
                "agents": {name: s.to_dict() for name, s in self._agents.items()},
                "tasks": {task_id: {"agent": name, **s.to_dict()}
                          for task_id, (name, s) in self._tasks.items()},
                "unpriced": sorted(self._unpriced),
            }

    # -- the caps --------------------------------------------------------------------------

    def _wall_locked(self) -> float:
        now = time.monotonic()
        if self._run is not None:
            self._run_last = now
        return self._wall_before + (self._run_last - self._run_started)

    def _spent_locked(self) -> Spend:
        total = Spend()
        total.add(self._own)
        for _, figures in self._tasks.values():
            total.add(figures)
        return total

    def _used_locked(self) -> dict[str, float]:
        spent = self._spent_locked()
        return {"max_model_calls": spent.calls, "max_tokens": spent.total_tokens,
                "max_usd": spent.usd, "max_wall_s": self._wall_locked()}

    def _reached_locked(self) -> str | None:
        used = self._used_locked()
        for cap, limit in self.budget.caps().items():
            if used[cap] >= limit:
                return cap
        return None

    def _fits_locked(self) -> bool:
        """Whether one more call fits beside the calls in flight, each as large as the
        largest so far (the calls in flight are already counted as calls)."""
        spent, caps = self._spent_locked(), self.budget.caps()
        ahead = len(self._inflight) + 1
        return (spent.calls + 1 <= caps.get("max_model_calls", math.inf)
                and spent.total_tokens + ahead * self._largest_tokens
                <= caps.get("max_tokens", math.inf)
                and spent.usd + ahead * self._largest_usd <= caps.get("max_usd", math.inf))

    def _try_admit_locked(self) -> Ticket | str | None:
        """A ticket, the reached cap, or `None`: wait for a call in flight to end."""
        reached = self._reached_locked()
        if reached is not None:
            self.reached = reached
            return reached
        if self._inflight and not self._fits_locked():
            return None
        ticket = Ticket(self)
        self._inflight.append(ticket)
        self._own.calls += 1
        self._run_calls += 1
        return ticket

    def admit(self) -> Ticket | str:
        """Let one model call start (a `Ticket`), or say which cap is reached. Waits while
        the calls in flight may still carry the tree to a cap."""
        with self._cond:
            while (decision := self._try_admit_locked()) is None:
                self._cond.wait()
            return decision

    async def aadmit(self) -> Ticket | str:
        """`admit` for the async path: waits without blocking the event loop."""
        while True:
            with self._cond:
                decision = self._try_admit_locked()
                if decision is not None:
                    return decision
                loop = asyncio.get_running_loop()
                future: asyncio.Future[None] = loop.create_future()
                self._waiters.append((loop, future))
            await future

    def release(self, ticket: Ticket) -> None:
        """The call of `ticket` ended (answered, failed or never made)."""
        with self._cond:
            if ticket in self._inflight:
                self._inflight.remove(ticket)
                if not ticket.claimed:  # no model call was made for it after all
                    self._own.calls -= 1
                    self._run_calls -= 1
            self._cond.notify_all()
            waiters, self._waiters = self._waiters, []
        for loop, future in waiters:
            with contextlib.suppress(RuntimeError):  # that loop has closed
                loop.call_soon_threadsafe(_wake, future)

    def reached_cap(self) -> str | None:
        """The cap reached now, if any (without starting anything)."""
        with self._cond:
            return self._reached_locked()

    def remaining(self) -> dict[str, float]:
        """`{cap: what is left}` for the caps set (never below zero)."""
        with self._cond:
            used = self._used_locked()
            return {cap: max(0, limit - used[cap]) for cap, limit in self.budget.caps().items()}

    def used(self) -> dict[str, float]:
        """What the thread used so far, by the cap it counts against."""
        with self._cond:
            return self._used_locked()

    # -- what runs under it ----------------------------------------------------------------

    @contextlib.contextmanager
    def active(self, ticket: Ticket | None = None) -> Iterator[None]:
        """Make this the current account (and `ticket` the call's) for the code inside."""
        token = _ACTIVE.set(self)
        ticket_token = _TICKET.set(ticket) if ticket is not None else None
        try:
            yield
        finally:
            if ticket_token is not None:
                _TICKET.reset(ticket_token)
            _ACTIVE.reset(token)

    def note_tool(self, name: str) -> None:
        """Count a finished tool call of this run (for the stop message)."""
        with self._cond:
            self._tools[name] += 1

    def record_task(self, task_id: str, agent_name: str, calls: int, input_tokens: int,
                    output_tokens: int) -> None:
        """Set what async subagent task `task_id` reported it used so far (cumulative
        figures: they replace earlier ones, never lower them)."""
        price = self.budget.price(self.task_model)
        usd = price.cost(input_tokens, output_tokens) if price else 0.0
        figures = Spend(calls, input_tokens, output_tokens, usd)
        with self._cond:
            _, known = self._tasks.get(task_id, (agent_name, Spend()))
            self._tasks[task_id] = (agent_name, known.maximum(figures))
            self._cond.notify_all()

    # -- callbacks: every chat-model call below an active account ------------------------

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[BaseMessage]], *, run_id: UUID,
        metadata: dict[str, Any] | None = None, **kwargs: Any,
    ) -> None:
        meta = metadata or {}
        name = str(meta.get("lc_agent_name") or UNNAMED_AGENT)
        ticket = _TICKET.get()
        with self._cond:
            self._running[run_id] = (name, model_key(meta))
            self._agents.setdefault(name, Spend()).calls += 1
            if ticket is not None and ticket.account is self and not ticket.claimed:
                ticket.claimed = True  # the call the ticket was issued for: counted then
            else:
                self._own.calls += 1
                self._run_calls += 1

    def on_llm_end(self, response: LLMResult, *, run_id: UUID, **kwargs: Any) -> None:
        with self._cond:
            started = self._running.pop(run_id, None)
            if started is None:
                return
            name, model = started
            tokens_in = tokens_out = 0
            for message in ai_messages(response):
                usage = message.usage_metadata
                if usage:
                    tokens_in += int(usage.get("input_tokens", 0))
                    tokens_out += int(usage.get("output_tokens", 0))
            price = self.budget.price(model)
            if price is None and model:
                self._unpriced.add(model)
            usd = price.cost(tokens_in, tokens_out) if price else 0.0
            for figures in (self._own, self._agents.setdefault(name, Spend())):
                figures.input_tokens += tokens_in
                figures.output_tokens += tokens_out
                figures.usd += usd
            self._largest_tokens = max(self._largest_tokens, tokens_in + tokens_out)
            self._largest_usd = max(self._largest_usd, usd)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        with self._cond:
            self._running.pop(run_id, None)

    # -- words -----------------------------------------------------------------------------

    def stop_message(self, cap: str, *, nested: bool = False, last_note: str = "") -> str:
        """What an agent answers instead of calling its model once `cap` is reached: the
        main agent's final message, or a subagent's answer to its parent (`nested`)."""
        with self._cond:
            spent = self._spent_locked()
            wall = self._wall_locked()
            agents = [(name, s.calls) for name, s in self._agents.items() if s.calls]
            tools = sorted(self._tools.items())
            run_calls = self._run_calls
        reached = _describe_cap(cap, self.budget.caps()[cap], spent, wall)
        if nested:
            text = (f"Stopped before finishing: the budget's {_LABELS[cap]} is reached "
                    f"({reached}), so no further model call was started.")
            if last_note.strip():
                text += f" The last note before the stop:\n\n{last_note.strip()[:2000]}"
            return text
        by_agent = ", ".join(f"{'main agent' if name == UNNAMED_AGENT else name} {calls}"
                             for name, calls in agents)
        done = (f"{spent.calls:,} model call(s) on this thread, {run_calls:,} in this run"
                + (f" (by agent: {by_agent})" if agents else "")
                + f"; {spent.total_tokens:,} tokens ({spent.input_tokens:,} in, "
                  f"{spent.output_tokens:,} out)")
        if spent.usd or "max_usd" in self.budget.caps():
            done += f"; ${spent.usd:.4f} estimated"
        done += f"; {wall:.1f} s"
        if tools:
            done += "; tool calls finished in this run: " + ", ".join(
                f"{name} ×{count}" for name, count in tools)
        return (f"Stopped: the budget's {_LABELS[cap]} is reached ({reached}). No further "
                f"model call was started; the calls already running finished. Done so far: "
                f"{done}. To continue, run again on this thread with a raised budget.")


def cap_label(cap: str) -> str:
    """How people call `cap` ("token cap" for `max_tokens`)."""
    return _LABELS.get(cap, cap)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _describe_cap(cap: str, limit: float, spent: Spend, wall: float) -> str:
    if cap == "max_model_calls":
        return f"{spent.calls:,} of {int(limit):,} model calls"
    if cap == "max_tokens":
        return f"{spent.total_tokens:,} of {int(limit):,} tokens"
    if cap == "max_usd":
        return f"${spent.usd:.4f} of ${limit:.4f}"
    return f"{wall:.1f} s of {limit:g} s"


def budget_summary(snapshot: Mapping[str, Any] | None) -> str | None:
    """One line for people: a `fathom_budget` snapshot's spend against its caps
    (`None` for no snapshot)."""
    if not isinstance(snapshot, Mapping):
        return None
    spent = _mapping(snapshot.get("spent"))
    limits = _mapping(snapshot.get("limits"))
    figures = Spend.from_dict(spent)
    wall = float(spent.get("wall_s") or 0)
    parts = []
    for cap, what, used, show in (
        ("max_tokens", "tokens", figures.total_tokens, lambda v: f"{int(v):,}"),
        ("max_model_calls", "model calls", figures.calls, lambda v: f"{int(v):,}"),
        ("max_usd", "USD", figures.usd, lambda v: f"${v:.4f}"),
        ("max_wall_s", "seconds", wall, lambda v: f"{v:.1f}"),
    ):
        limit = limits.get(cap)
        if limit:
            parts.append(f"{what} {show(used)} of {show(limit)} ({100 * used / limit:.0f}%)")
        elif cap in ("max_tokens", "max_model_calls"):
            parts.append(f"{what} {show(used)} (no cap)")
    line = "budget: " + " · ".join(parts)
    if snapshot.get("reached"):
        line += f" · reached: {_LABELS.get(str(snapshot['reached']), snapshot['reached'])}"
    return line
