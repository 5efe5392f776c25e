"""Custom workflow: plan → work → check → report, as one LangGraph graph.

```
START -> intake -> planner -> chat, or planning failed ---------------------> reporter -> END
                   planner -> clarify -> ask (interrupt; resumed with the answer) -> planner
                   planner -> Send per task of wave 1 -> worker x N -> join
                              join -> Send per task of the next wave -> worker x N -> join
                              join -> after the last wave -> checker
                   checker -> passed, round limit or no valid verdict -> reporter
                   checker -> failed with rounds left -> planner (re-plan; completed kept)
                   checker -> round limit, escalate=True -> escalate (interrupt)
                              escalate -> switch -> worker x N ... -> checker
                              escalate -> degrade -> planner (a simpler plan)
                              escalate -> skip -> reporter;  abort -> END
```

The planner (a model) splits the request into `SubTask`s whose actions come from an
`ActionRegistry`; code, not the model, orders them into waves from their dependencies, and
the tasks of one wave run in parallel, each on its worker, which sees only its own task and
the outputs of the tasks it depends on. The checker (a model) judges the results against
the request: it passes them to the reporter, or sends feedback back to the planner, which
plans only what is still needed while completed results are kept, until `max_rounds`;
then, with `escalate=True`, a person decides (see `escalation`). Tasks whose action needs
approval ask a person first, in a wave of their own. Model answers are typed pydantic
objects, validated before they enter the state, and progress streams as custom events
(`stream_mode="custom"`), each `{"event", "msg", "data"}`: `plan_thinking`,
`plan_invalid`, `plan_done` (tasks, waves, the tasks run in series for lack of dependency
information, and the dropped hints), `clarified`, `work_start`, `work_tool_start` /
`work_tool_end` (a worker's tool calls), `work_retry`, `work_done` (with tokens),
`check_thinking`, `check_invalid`, `check_done`, `escalation_answered`,
`report_thinking`, `report_done`, `done` (with the run's metrics). With tracing on
(`fathom.tracing.enable`), each subtask is a span of its own and the run's span carries
the metrics (`fathom.patterns.workflow.metrics`).

```python
workflow = create_plan_work_check_report(
    "openai:gpt-4.1",
    {"researcher": research_agent, "writer": writer_agent},
    actions=ActionRegistry([Action(name="search", description="..."), ...]),
    checkpointer=InMemorySaver(),
)
for mode, chunk in workflow.stream({"request": "..."}, config, stream_mode=["custom", "updates"]):
    ...
```
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer, Overwrite

from fathom.errors import require_at_least_one
from fathom.models import resolve_model
from fathom.patterns.workflow import contracts as _contracts
from fathom.patterns.workflow.contracts import *  # noqa: F403 (the names in contracts.__all__)
from fathom.patterns.workflow.contracts import Action, ActionRegistry
from fathom.patterns.workflow.dispatch import Dispatcher
from fathom.patterns.workflow.escalation import EscalationNode
from fathom.patterns.workflow.metrics import TaskCost, WorkflowMetrics, workflow_metrics
from fathom.patterns.workflow.planner import PlannerNode
from fathom.patterns.workflow.review import CheckerNode, ReporterNode
from fathom.patterns.workflow.state import (
    CHECKPOINT_TYPES,
    WorkflowInput,
    WorkflowState,
    WorkflowStatus,
    merge_results,
)
from fathom.patterns.workflow.structured import StructuredOutputError
from fathom.patterns.workflow.waves import PlanOrderError, TaskOrder, compute_waves, order_tasks
from fathom.patterns.workflow.workers import Worker, WorkerRunner, render_task
from fathom.tracing.settings import active_handler

__all__ = [
    "CHECKPOINT_TYPES",
    "PlanOrderError",
    "StructuredOutputError",
    "TaskCost",
    "TaskOrder",
    "Worker",
    "WorkflowInput",
    "WorkflowMetrics",
    "WorkflowState",
    "WorkflowStatus",
    "compute_waves",
    "create_plan_work_check_report",
    "merge_results",
    "order_tasks",
    "render_task",
    "workflow_metrics",
]
__all__ += _contracts.__all__


def intake(state: WorkflowState) -> dict[str, Any]:
    """Take the request and start the run from a clean slate."""
    messages = state.get("messages") or []
    last = messages[-1] if messages else None
    new_messages: list[AnyMessage] = []
    if isinstance(last, HumanMessage):
        request = str(last.text).strip()
    else:
        request = (state.get("request") or "").strip()
        if request:
            new_messages.append(HumanMessage(content=request))
    if not request:
        raise ValueError(
            "The workflow needs a request: invoke it with {'request': '...'} or with "
            "{'messages': [...]} ending in the user's message."
        )
    return {
        "request": request,
        "messages": new_messages,
        "clarifications": [],
        "plan": None,
        "tasks": {},
        "waves": [],
        "wave": 0,
        "results": Overwrite({}),
        "history": Overwrite([]),
        "redo": [],
        "round": 0,
        "extra_rounds": 0,
        "verdict": None,
        "escalations": [],
        "degrade": None,
        "status": "running",
        "errors": [],
        "report": "",
        "metrics": None,
    }


def create_plan_work_check_report(
    planner_model: str | BaseChatModel,
    workers: Mapping[str, Worker],
    checker_model: str | BaseChatModel | None = None,
    reporter_model: str | BaseChatModel | None = None,
    *,
    actions: ActionRegistry | Iterable[Action],
    max_rounds: int = 3,
    max_parallel: int | None = None,
    output_retries: int = 2,
    escalate: bool = False,
    checkpointer: Checkpointer = None,
    name: str = "plan_work_check_report",
) -> CompiledStateGraph[WorkflowState, Any, WorkflowInput, WorkflowState]:
    """Build the plan → work → check → report workflow as a compiled LangGraph graph.

    Invoke it with `{"request": "..."}` (or `{"messages": [...]}`); the answer is in
    `report` (and appended to `messages`), how it ended in `status`, every task's result
    in `results`. When the planner asks a question the run pauses with an interrupt whose
    value is `{"type": "clarify", "question", "request"}`; resume on the same thread with
    `Command(resume="the answer")` (this needs a checkpointer). A task whose action needs
    approval pauses with `{"type": "approval", "task_id", "task", ...}`; resume with
    `"approve"`, `"reject"`, `{"type": "reject", "message": ...}` or
    `{"type": "edit", "inputs": {...}}` (several at once: `Command(resume={id: answer})`).
    With `escalate=True`, a check that fails in the last round pauses with
    `{"type": "escalation", "failed", "feedback", ...}`; resume with an `Escalation`
    (`"abort"`, `{"action": "switch", "worker": "..."}`, ...). When the run ends,
    `metrics` holds its `WorkflowMetrics`.

    Args:
        planner_model: Splits the request into tasks (a model or `"provider:model"`).
        workers: The workers by name: compiled graphs with `messages` (e.g. LangChain
            agents), chat models, or callables `(WorkItem) -> str` (sync or async).
        checker_model: Judges the results; defaults to `planner_model`.
        reporter_model: Writes the answer; defaults to `planner_model`.
        actions: The actions plans may use.
        max_rounds: Most work rounds (each ends in a check); a check that still fails
            in the last round ends the run with status `max_rounds`, or escalates.
        max_parallel: Most tasks in one wave (none: no limit); waves of tasks that need
            approval are not capped.
        output_retries: How often the planner and checker are asked again after an
            invalid answer before the run reports the failure.
        escalate: After the last round fails its check, ask a person (an interrupt)
            whether to switch worker, degrade, skip or abort, instead of reporting.
        checkpointer: Needed for interrupts (clarifying questions, approvals,
            escalations) and durable threads.
        name: The graph's name.

    Returns:
        The compiled graph; it runs with `invoke`/`stream` and `ainvoke`/`astream`.

    Raises:
        ValueError: No workers, bad limits, or an action allowing an unknown worker.
        TypeError: A worker of an unsupported kind.
    """
    if not isinstance(workers, Mapping) or not workers:
        raise ValueError("workers must be a non-empty mapping of worker name to worker")
    for worker_name in workers:
        if not isinstance(worker_name, str) or not worker_name:
            raise ValueError(f"worker names must be non-empty strings, not {worker_name!r}")
    registry = actions if isinstance(actions, ActionRegistry) else ActionRegistry(actions)
    for action in registry.values():
        unknown = [agent for agent in action.agents if agent not in workers]
        if unknown:
            raise ValueError(
                f"action {action.name!r} allows unknown worker(s) {unknown}; "
                f"workers are {list(workers)}"
            )
    require_at_least_one("max_rounds", max_rounds)
    if max_parallel is not None and max_parallel < 1:
        raise ValueError(f"max_parallel must be at least 1 or None, not {max_parallel}")
    if output_retries < 0:
        raise ValueError(f"output_retries must be 0 or more, not {output_retries}")

    planner = resolve_model(planner_model)
    attempts = output_retries + 1
    plans = PlannerNode(
        planner,
        registry,
        list(workers),
        max_rounds=max_rounds,
        max_parallel=max_parallel,
        attempts=attempts,
    )
    runners = {worker_name: WorkerRunner(worker_name, w) for worker_name, w in workers.items()}
    dispatch = Dispatcher(runners, registry)
    checks = CheckerNode(
        resolve_model(checker_model) if checker_model is not None else planner,
        max_rounds=max_rounds,
        attempts=attempts,
        escalate=escalate,
    )
    escalation = EscalationNode(dispatch, registry, list(workers), max_parallel=max_parallel)
    reports = ReporterNode(resolve_model(reporter_model) if reporter_model is not None else planner)

    graph = StateGraph(WorkflowState, input_schema=WorkflowInput)
    graph.add_node("intake", intake)
    graph.add_node("planner", RunnableLambda(plans.run, afunc=plans.arun, name="planner"))
    graph.add_node("ask", plans.ask)
    graph.add_node("worker", RunnableLambda(dispatch.work, afunc=dispatch.awork, name="worker"))
    graph.add_node("join", dispatch.join)
    graph.add_node("checker", RunnableLambda(checks.run, afunc=checks.arun, name="checker"))
    graph.add_node("escalate", escalation.escalate)
    graph.add_node(
        "reporter", RunnableLambda(reports.report, afunc=reports.areport, name="reporter")
    )

    graph.add_edge(START, "intake")
    graph.add_edge("intake", "planner")
    routes = ["reporter", "ask", "checker", "worker"]
    graph.add_conditional_edges("planner", dispatch.route, routes)
    graph.add_edge("ask", "planner")
    graph.add_edge("worker", "join")
    graph.add_conditional_edges("join", dispatch.route, routes)
    graph.add_conditional_edges(
        "checker", checks.route_after_check, ["planner", "escalate", "reporter"]
    )
    graph.add_conditional_edges(
        "escalate", escalation.route, ["planner", "worker", "reporter", END]
    )
    graph.add_edge("reporter", END)

    # Rounds are bounded by `max_rounds`, not by LangGraph's step count.
    run_config = RunnableConfig(recursion_limit=10_000)
    handler = active_handler()
    if handler is not None:  # tracing is on: the run, its subtasks and model calls as spans
        run_config["callbacks"] = [handler]
    return graph.compile(checkpointer=checkpointer, name=name).with_config(run_config)
