"""The plan → work → check → report workflow: `create_plan_work_check_report` and its types.

`graph` builds the graph; `contracts` (the `SubTask` contract and actions), `waves`
(dependency waves), `planner`, `dispatch`, `workers`, `review`, `structured` (validated
structured output) and `prompts` are its parts.
"""

from fathom.patterns.workflow.graph import (
    CHECKPOINT_TYPES,
    Action,
    ActionRegistry,
    CheckVerdict,
    Clarification,
    Plan,
    PlanOrderError,
    RetryPolicy,
    StructuredOutputError,
    SubTask,
    TaskResult,
    TaskStatus,
    Worker,
    WorkflowInput,
    WorkflowState,
    WorkflowStatus,
    WorkItem,
    compute_waves,
    create_plan_work_check_report,
    merge_results,
    render_task,
)

__all__ = [
    "CHECKPOINT_TYPES",
    "Action",
    "ActionRegistry",
    "CheckVerdict",
    "Clarification",
    "Plan",
    "PlanOrderError",
    "RetryPolicy",
    "StructuredOutputError",
    "SubTask",
    "TaskResult",
    "TaskStatus",
    "WorkItem",
    "Worker",
    "WorkflowInput",
    "WorkflowState",
    "WorkflowStatus",
    "compute_waves",
    "create_plan_work_check_report",
    "merge_results",
    "render_task",
]
