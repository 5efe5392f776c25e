"""Budgets across an agent tree: each agent asks one account before every model call.

`create_deep_agent(budget=fathom.Budget(...))` puts `BudgetMiddleware` on the main agent and
a `BudgetGate` on every subagent it builds (the `task` subagents, which an `eval` runs too).

- The main agent's middleware opens the thread's `BudgetAccount` (`fathom.budget`) at the
  first model or tool call of a run: from the account it already holds for the thread in
  this process, else from the thread's `fathom_budget` state channel. A run's
  `config["configurable"]["fathom_budget"]` (a mapping of caps) replaces the agent's caps
  for that run; a run started by a parent as an async subagent is also held to what the
  parent had left (`fathom_budget_grant` in its metadata).
- While an agent's model or tool call runs, the account is the active one, so every
  subagent below it (a `task`, an `eval`'s `task()`) joins the same account.
- Before each model call, the account admits it or names the cap that is reached. At the
  cap the model is not called: a subagent answers its parent that it was stopped, and the
  main agent ends the run with a final message saying which cap was reached and what was
  done. Nothing raises, so the checkpoint stays whole and a later run with a raised budget
  continues.
- The main agent writes the account's snapshot into `fathom_budget` with each model call's
  answer (no extra graph step). On the async path it first reads what its async subagent
  tasks reported (their threads' `fathom_usage` metadata) into the account.
- At the cap, tools that would start more spending (`task`, `start_async_task`,
  `update_async_task`) answer that nothing was started; other tool calls the model asked for
  still run (they spend no tokens: a file the model wrote at the cap is kept).

Layer: capabilities.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Annotated, Any, NotRequired, cast

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ExtendedModelResponse,
    ModelRequest,
    ModelResponse,
    ToolCallRequest,
)
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.config import get_config
from langgraph.runtime import get_runtime
from langgraph.types import Command

from fathom.budget import (
    BUDGET_KEY,
    CAPS,
    GRANT_KEY,
    Budget,
    BudgetAccount,
    BudgetError,
    Ticket,
    active_account,
    cap_label,
    merge_budget_state,
)
from fathom.middleware.async_subagents.tools import (
    START_ASYNC_TASK_TOOL,
    UPDATE_ASYNC_TASK_TOOL,
)
from fathom.middleware.subagents import TASK_TOOL
from fathom.pricing import model_key
from fathom.tool_answers import Failure, aattempt, tool_error
from fathom.usage import task_usage

__all__ = [
    "DELEGATING_TOOLS",
    "BudgetGate",
    "BudgetMiddleware",
    "BudgetState",
    "budget_middleware",
    "check_prices",
]


DELEGATING_TOOLS = frozenset({TASK_TOOL, START_ASYNC_TASK_TOOL, UPDATE_ASYNC_TASK_TOOL})
"""Tools that start more spending (a subagent): refused once a cap is reached."""

TASK_READ_TIMEOUT_S = 5.0
"""How long reading one async task's reported usage may take before it is left for later."""

_MAX_ACCOUNTS = 1024
"""Accounts a middleware keeps in memory (by thread); the oldest go first, to be opened
again from their thread's state when needed."""

_CONFIG_WHERE = 'config["configurable"]["fathom_budget"]'


class BudgetState(AgentState):
    """The `fathom_budget` channel: what the thread's agent tree spent (see
    `BudgetAccount.snapshot`)."""

    fathom_budget: NotRequired[Annotated[dict[str, Any] | None, merge_budget_state]]


def _last_note(request: ModelRequest[Any]) -> str:
    for message in reversed(request.messages):
        if isinstance(message, AIMessage) and message.text.strip():
            return message.text
    return ""


def _stop(
    account: BudgetAccount, cap: str, *, nested: bool, request: ModelRequest[Any]
) -> AIMessage:
    note = _last_note(request) if nested else ""
    text = account.stop_message(cap, nested=nested, last_note=note)
    return AIMessage(content=text, response_metadata={"finish_reason": "budget",
                                                      BUDGET_KEY: {"reached": cap}})


def _refusal(account: BudgetAccount, request: ToolCallRequest) -> ToolMessage | None:
    """The answer to a delegating tool call once a cap is reached; `None` runs the tool."""
    name = request.tool_call.get("name", "")
    if name not in DELEGATING_TOOLS:
        return None
    cap = account.reached_cap()
    if cap is None:
        return None
    return tool_error(
        f"Not started: the budget's {cap_label(cap)} is reached ({cap}), so no subagent may "
        "start. Finish with what you have.",
        tool_call_id=request.tool_call.get("id"), name=name,
    )


class _BudgetHooks(AgentMiddleware):
    """Admission before each model call and the active account around each tool call."""

    def _model_account(self, request: ModelRequest[Any]) -> tuple[BudgetAccount, bool] | None:
        """The account and whether this agent is nested in a tree (not its root)."""
        account = active_account()
        return (account, True) if account is not None else None

    def _tool_account(self, request: ToolCallRequest) -> BudgetAccount | None:
        return active_account()

    def _answer(self, account: BudgetAccount, nested: bool, response: ModelResponse[Any]
                ) -> Any:
        return response

    def wrap_model_call(
        self, request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> Any:
        found = self._model_account(request)
        if found is None:
            return handler(request)
        account, nested = found
        decision = account.admit()
        if isinstance(decision, str):
            return self._answer(account, nested, ModelResponse(
                result=[_stop(account, decision, nested=nested, request=request)]))
        return self._answer(account, nested, self._call(account, decision, request, handler))

    @staticmethod
    def _call(account: BudgetAccount, ticket: Ticket, request: ModelRequest[Any],
              handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]) -> ModelResponse[Any]:
        try:
            with account.active(ticket):
                return handler(request)
        finally:
            account.release(ticket)

    async def awrap_model_call(
        self, request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> Any:
        found = self._model_account(request)
        if found is None:
            return await handler(request)
        account, nested = found
        await self._before_admission(account, nested, request)
        decision = await account.aadmit()
        if isinstance(decision, str):
            return self._answer(account, nested, ModelResponse(
                result=[_stop(account, decision, nested=nested, request=request)]))
        try:
            with account.active(decision):
                response = await handler(request)
        finally:
            account.release(decision)
        return self._answer(account, nested, response)

    async def _before_admission(self, account: BudgetAccount, nested: bool,
                                request: ModelRequest[Any]) -> None:
        return None

    def wrap_tool_call(
        self, request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        account = self._tool_account(request)
        if account is None:
            return handler(request)
        refusal = _refusal(account, request)
        if refusal is not None:
            return refusal
        with account.active():
            result = handler(request)
        account.note_tool(request.tool_call.get("name", ""))
        return result

    async def awrap_tool_call(
        self, request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        account = self._tool_account(request)
        if account is None:
            return await handler(request)
        refusal = _refusal(account, request)
        if refusal is not None:
            return refusal
        with account.active():
            result = await handler(request)
        account.note_tool(request.tool_call.get("name", ""))
        return result


class BudgetGate(_BudgetHooks):
    """A subagent's part of a budget: it joins the account of the tree it runs in.

    Each model call waits for the account's admission; at the cap the subagent answers its
    parent that it was stopped (with its last note) instead of calling its model. Run on
    its own, outside any budgeted tree, it does nothing.
    """


class BudgetMiddleware(_BudgetHooks):
    """The main agent's part of a budget: it holds the thread's account and its channel.

    Args:
        budget: The caps and prices (`fathom.Budget`, or a mapping of its fields).
        async_subagents: The agent's `AsyncSubAgentMiddleware`, whose tasks' reported usage
            counts towards the budget (read before each model call on the async path).
        task_model: "provider:model" whose price prices the async tasks' tokens; `None`:
            they count as tokens and calls only.

    A run's `config["configurable"]["fathom_budget"]` (a mapping of caps; `None` turns a cap
    off) replaces this budget's caps for that run.
    """

    state_schema = BudgetState

    def __init__(
        self, budget: Budget | Mapping[str, Any], *, async_subagents: Any = None,
        task_model: str | None = None,
    ) -> None:
        super().__init__()
        self.budget = Budget.from_mapping(budget)
        self.async_subagents = async_subagents
        self.task_model = task_model
        self._lock = threading.Lock()
        self._accounts: OrderedDict[Any, tuple[Any, BudgetAccount]] = OrderedDict()

    # -- the thread's account --------------------------------------------------------------

    def account_for(self, state: Mapping[str, Any], run: Any,
                    config: Mapping[str, Any]) -> BudgetAccount:
        """The account of the thread `config` names (opened from `state` when this
        middleware holds none), begun for run `run` with this run's caps."""
        configurable = config.get("configurable") or {}
        thread = configurable.get("thread_id")
        key: Any = ("thread", str(thread)) if thread else ("run", id(run))
        with self._lock:
            entry = self._accounts.get(key)
            if entry is None:
                entry = (run, BudgetAccount(self.budget, task_model=self.task_model))
                self._accounts[key] = entry
                while len(self._accounts) > _MAX_ACCOUNTS:
                    self._accounts.popitem(last=False)
            self._accounts.move_to_end(key)
        account = entry[1]
        if account.begin_run(run):
            prior = state.get(BUDGET_KEY)
            if isinstance(prior, Mapping):
                account.load(prior)
            account.begin_run(run, self._run_budget(account, config))
        return account

    def _run_budget(self, account: BudgetAccount, config: Mapping[str, Any]) -> Budget:
        overrides = (config.get("configurable") or {}).get(BUDGET_KEY)
        budget = self.budget.merged(overrides, where=_CONFIG_WHERE) if overrides else self.budget
        grant = (config.get("metadata") or {}).get(GRANT_KEY)
        if not isinstance(grant, Mapping):
            return budget
        # a parent's remaining budget: at most that much more than this thread spent so far
        used = account.used()
        caps = budget.caps()
        for cap in CAPS:
            left = grant.get(cap)
            if isinstance(left, int | float) and not isinstance(left, bool) and left >= 0:
                allowed = used[cap] + left
                if cap in ("max_tokens", "max_model_calls"):
                    allowed = int(allowed)
                caps[cap] = min(caps.get(cap, allowed), allowed)
        return Budget(**cast("dict[str, Any]", caps), prices=budget.prices)

    def _model_account(self, request: ModelRequest[Any]) -> tuple[BudgetAccount, bool] | None:
        outer = active_account()
        if outer is not None:  # this agent runs inside another budgeted tree: join it
            return outer, True
        state = request.state if isinstance(request.state, Mapping) else {}
        return self.account_for(state, _run_marker(request.runtime), get_config()), False

    def _tool_account(self, request: ToolCallRequest) -> BudgetAccount | None:
        outer = active_account()
        if outer is not None:
            return outer
        state = request.state if isinstance(request.state, Mapping) else {}
        try:
            runtime = get_runtime()
        except RuntimeError:
            runtime = None
        return self.account_for(state, _run_marker(runtime), request.runtime.config or {})

    def _answer(self, account: BudgetAccount, nested: bool, response: ModelResponse[Any]
                ) -> Any:
        if nested:
            return response
        # the spend goes into the thread's state with the model's answer, in the same step
        return ExtendedModelResponse(model_response=response,
                                     command=Command(update={BUDGET_KEY: account.snapshot()}))

    async def _before_admission(self, account: BudgetAccount, nested: bool,
                                request: ModelRequest[Any]) -> None:
        if nested or self.async_subagents is None:
            return
        state = request.state if isinstance(request.state, Mapping) else {}
        tasks = state.get("async_tasks") or {}
        if tasks:
            await self.read_task_usage(account, tasks)

    async def read_task_usage(self, account: BudgetAccount, tasks: Mapping[str, Any]) -> None:
        """Record in `account` what each async task's thread says its runs used."""
        tracker = getattr(self.async_subagents, "tracker", None)
        if tracker is None:
            return

        async def read(task: Mapping[str, Any]) -> None:
            spec = tracker.specs.get(task.get("agent_name"))
            if spec is None:
                return
            thread_id = str(task.get("thread_id") or task.get("task_id"))

            async def get() -> Any:
                client = tracker.clients.get(spec)
                return await asyncio.wait_for(client.threads.get(thread_id), TASK_READ_TIMEOUT_S)

            # the server may host the task in process and raise anything through the SDK:
            # a usage read before a model call is a boundary that never fails the call
            # (`aattempt` logs the failure)
            thread = await aattempt(get(), f"reading the usage of async task {thread_id}")
            if isinstance(thread, Failure):
                return
            totals = task_usage(thread)
            if totals is not None:
                account.record_task(str(task.get("task_id") or thread_id),
                                    str(task.get("agent_name") or "async task"),
                                    totals.calls, totals.input_tokens, totals.output_tokens)

        await asyncio.gather(*(read(task) for task in tasks.values() if isinstance(task, Mapping)))


_STATIC_RUN = object()


def _run_marker(runtime: Any) -> Any:
    """What stays the same for one run of the graph, and only for it: LangGraph's
    run-scoped `RunControl`, shared by the subgraphs of the run."""
    control = getattr(runtime, "control", None)
    return control if control is not None else _STATIC_RUN


def _model_name(model: Any) -> str | None:
    if isinstance(model, str):
        return model if ":" in model else None
    params = getattr(model, "_get_ls_params", None)
    if params is None:
        return None
    try:
        return model_key(params())
    except (TypeError, ValueError, AttributeError):
        return None


def check_prices(budget: Budget, models: Sequence[Any]) -> None:
    """Raise `BudgetError` when `budget` caps US dollars and one of `models` (instances or
    "provider:model" strings) has no price: that cap would not hold for its calls."""
    if budget.max_usd is None:
        return
    for model in models:
        name = _model_name(model)
        if name is not None and budget.price(name) is None:
            raise BudgetError(
                f"Budget(max_usd={budget.max_usd}) needs the price of {name}, which the table "
                f"does not have: pass Budget(prices={{{name!r}: (input, output)}}) in USD per "
                f'million tokens (or, for the fathom command, [prices."{name}"] in fathom.toml).'
            )


def budget_middleware(
    budget: Budget | Mapping[str, Any] | None, model: Any, subagents: Sequence[Any] = (), *,
    async_subagents: Any = None,
) -> tuple[BudgetMiddleware | None, list[AgentMiddleware]]:
    """The main agent's budget middleware and the middleware each subagent gets, for
    `create_deep_agent` (`(None, [])` without a budget). Raises `BudgetError` for an
    unpriced model (the agent's, or a subagent spec's) under `max_usd`."""
    if budget is None:
        return None, []
    checked = Budget.from_mapping(budget)
    models = [spec.get("model") for spec in subagents if isinstance(spec, Mapping)]
    check_prices(checked, [model, *(m for m in models if m)])
    root = BudgetMiddleware(checked, async_subagents=async_subagents,
                            task_model=_model_name(model))
    return root, [BudgetGate()]
