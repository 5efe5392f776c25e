"""Middleware: one capability each, usable with plain `langchain.agents.create_agent`.

Layer: capabilities; it must not import agent, project, server, protocols or cli.
"""

from typing import TYPE_CHECKING

from fathom._lazy import lazy_exports

if TYPE_CHECKING:
    from fathom.middleware.async_subagents.middleware import AsyncSubAgentMiddleware
    from fathom.middleware.async_subagents.tasks import AsyncSubAgent, AsyncTask, TaskEvent
    from fathom.middleware.code_interpreter import CodeInterpreterMiddleware
    from fathom.middleware.context.summarization import (
        SummarizationMiddleware,
        SummarizationToolMiddleware,
        create_summarization_tool_middleware,
    )
    from fathom.middleware.execute import ExecuteMiddleware
    from fathom.middleware.filesystem.middleware import FilesystemMiddleware
    from fathom.middleware.human_in_the_loop import HumanInTheLoopMiddleware
    from fathom.middleware.memory import MemoryMiddleware
    from fathom.middleware.patch_tool_calls import PatchToolCallsMiddleware
    from fathom.middleware.permissions import FilesystemPermission
    from fathom.middleware.planning import PlanningMiddleware
    from fathom.middleware.rubric import (
        GRADER_SYSTEM_PROMPT,
        RUBRIC_GRADER_MESSAGE_SOURCE,
        CriterionEval,
        CriterionFail,
        CriterionPass,
        GraderResponse,
        GraderVerdict,
        RubricEvaluation,
        RubricMiddleware,
        RubricResult,
        RubricState,
    )
    from fathom.middleware.skills import SkillMetadata, SkillsMiddleware, SkillsState
    from fathom.middleware.subagents import CompiledSubAgent, SubAgent, SubAgentMiddleware
    from fathom.middleware.unsupported_content import UnsupportedContentMiddleware

    DEEPAGENTS_DEFAULT_SUMMARY_PROMPT: str

_WHERE = {
    "fathom.middleware.async_subagents.middleware": ("AsyncSubAgentMiddleware",),
    "fathom.middleware.async_subagents.tasks": ("AsyncSubAgent", "AsyncTask", "TaskEvent"),
    "fathom.middleware.execute": ("ExecuteMiddleware",),
    "fathom.middleware.filesystem.middleware": ("FilesystemMiddleware",),
    "fathom.middleware.human_in_the_loop": ("HumanInTheLoopMiddleware",),
    "fathom.middleware.memory": ("MemoryMiddleware",),
    "fathom.middleware.patch_tool_calls": ("PatchToolCallsMiddleware",),
    "fathom.middleware.permissions": ("FilesystemPermission",),
    "fathom.middleware.planning": ("PlanningMiddleware",),
    "fathom.middleware.skills": ("SkillMetadata", "SkillsMiddleware", "SkillsState"),
    "fathom.middleware.subagents": ("CompiledSubAgent", "SubAgent", "SubAgentMiddleware"),
    "fathom.middleware.context.summarization": (
        "SummarizationMiddleware", "SummarizationToolMiddleware",
        "create_summarization_tool_middleware",
    ),
    "fathom.middleware.code_interpreter": ("CodeInterpreterMiddleware",),
    # RubricMiddleware and UnsupportedContentMiddleware (with the rubric's names)
    "fathom.middleware.rubric": (
        "GRADER_SYSTEM_PROMPT", "RUBRIC_GRADER_MESSAGE_SOURCE", "CriterionEval", "CriterionFail",
        "CriterionPass", "GraderResponse", "GraderVerdict", "RubricEvaluation",
        "RubricMiddleware", "RubricResult", "RubricState",
    ),
    "fathom.middleware.unsupported_content": ("UnsupportedContentMiddleware",),
}

__all__ = [
    "DEEPAGENTS_DEFAULT_SUMMARY_PROMPT",
    "GRADER_SYSTEM_PROMPT",
    "RUBRIC_GRADER_MESSAGE_SOURCE",
    "AsyncSubAgent",
    "AsyncSubAgentMiddleware",
    "AsyncTask",
    "CodeInterpreterMiddleware",
    "CompiledSubAgent",
    "CriterionEval",
    "CriterionFail",
    "CriterionPass",
    "ExecuteMiddleware",
    "FilesystemMiddleware",
    "FilesystemPermission",
    "GraderResponse",
    "GraderVerdict",
    "HumanInTheLoopMiddleware",
    "MemoryMiddleware",
    "PatchToolCallsMiddleware",
    "PlanningMiddleware",
    "RubricEvaluation",
    "RubricMiddleware",
    "RubricResult",
    "RubricState",
    "SkillMetadata",
    "SkillsMiddleware",
    "SkillsState",
    "SubAgent",
    "SubAgentMiddleware",
    "SummarizationMiddleware",
    "SummarizationToolMiddleware",
    "TaskEvent",
    "UnsupportedContentMiddleware",
    "create_summarization_tool_middleware",
]

# Each name is imported on first use, so importing one middleware module does not load them
# all (`CodeInterpreterMiddleware` also needs `fathom[code]`).
_lazy_getattr, __dir__ = lazy_exports(__name__, _WHERE)


def __getattr__(name: str) -> object:
    # the reference's name of the default summary prompt: the same string object
    if name == "DEEPAGENTS_DEFAULT_SUMMARY_PROMPT":
        from fathom.middleware.context.summarization import SUMMARY_PROMPT

        globals()[name] = SUMMARY_PROMPT
        return SUMMARY_PROMPT
    return _lazy_getattr(name)
