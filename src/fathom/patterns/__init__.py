"""The multi-agent patterns as ready constructs: subagents, handoffs, skills, router and a
custom plan → work → check → report workflow. See docs/patterns.md for when to use which.

- `create_supervisor` / `agent_as_tool` / `task_tool`: a supervisor calls subagents as tools.
- `StepMiddleware` / `transfer_tool` / `build_handoff_graph`: handoffs driven by state.
- `SkillMiddleware`: one agent that loads skills on demand.
- `create_router` / `router_tool`: classify, fan out in parallel, synthesise.
- `create_plan_work_check_report`: plan, work in dependency waves, check, re-plan, report.
- `create_rag_workflow`: rewrite the question, retrieve from a store's index, answer.

Layer: agent; it must not import project, server, protocols or cli.
"""

from fathom.patterns.handoffs import (
    Step,
    StepMiddleware,
    build_handoff_graph,
    go_back_tool,
    handoff_tool,
    transfer_tool,
    transition,
)
from fathom.patterns.rag import RewrittenQuery, create_rag_workflow
from fathom.patterns.router import Expert, create_router, router_tool
from fathom.patterns.skills import Skill, SkillMiddleware, require_skill
from fathom.patterns.supervisor import Subagent, agent_as_tool, create_supervisor, task_tool
from fathom.patterns.workflow import (
    Action,
    ActionRegistry,
    CheckVerdict,
    Plan,
    SubTask,
    TaskResult,
    compute_waves,
    create_plan_work_check_report,
)

__all__ = [
    "Action",
    "ActionRegistry",
    "CheckVerdict",
    "Expert",
    "Plan",
    "RewrittenQuery",
    "Skill",
    "SkillMiddleware",
    "Step",
    "StepMiddleware",
    "SubTask",
    "Subagent",
    "TaskResult",
    "agent_as_tool",
    "build_handoff_graph",
    "compute_waves",
    "create_plan_work_check_report",
    "create_rag_workflow",
    "create_router",
    "create_supervisor",
    "go_back_tool",
    "handoff_tool",
    "require_skill",
    "router_tool",
    "task_tool",
    "transfer_tool",
    "transition",
]
