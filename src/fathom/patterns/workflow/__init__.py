"""The plan → work → check → report workflow: `create_plan_work_check_report` and its types.

`graph` builds the graph; `contracts` (the `SubTask` contract and actions), `waves`
(dependency waves), `planner`, `dispatch`, `workers`, `review`, `structured` (validated
structured output) and `prompts` are its parts.

Layer: agent; it must not import project, server, protocols or cli.
"""

from fathom.patterns.workflow import graph as _graph
from fathom.patterns.workflow.graph import *  # noqa: F403 (the names listed in graph.__all__)

__all__: list[str] = []
__all__ += _graph.__all__
