"""Builders for the code interpreter tests: agents whose models are scripted."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import ToolMessage

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ai, tool_call


def eval_call(code: str, id: str = "eval_1") -> Any:
    """A model reply that calls `eval` with `code`."""
    return ai("", tool_call("eval", {"code": code}, id=id))


def echo_model() -> ScriptedModel:
    """A subagent model answering `done: <task>` to every task."""
    return ScriptedModel(policy=lambda req: f"done: {req.last_human_text}")


def agent(codes: list[Any], *, sub: ScriptedModel | None = None, subagents: Any = None,
          **options: Any) -> tuple[Any, ScriptedModel]:
    """A deep agent whose model runs each of `codes` in `eval` in turn (an `AIMessage`
    among them is replied as it is, ending the turn), then answers with the text of the
    last tool result."""
    main = ScriptedModel(
        replies=[eval_call(code, id=f"eval_{i}") if isinstance(code, str) else code
                 for i, code in enumerate(codes)],
        policy=lambda req: f"final: {req.tool_results[-1].text}",
    )
    specs = subagents if subagents is not None else [
        {"name": "worker", "description": "does one item", "system_prompt": "work",
         "model": sub or echo_model()},
    ]
    graph = create_deep_agent(main, subagents=specs, general_purpose_subagent=False,
                              code_interpreter=options.pop("code_interpreter", True), **options)
    return graph, main


def eval_results(result: dict[str, Any]) -> list[ToolMessage]:
    """The `eval` tool messages of a run, in order."""
    return [m for m in result["messages"] if isinstance(m, ToolMessage) and m.name == "eval"]


def user(text: str = "go") -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}
