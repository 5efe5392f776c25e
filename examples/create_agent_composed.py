"""A plain LangChain `create_agent` with fathom's middleware composed by hand.

Deep Agents tutorial, section "Use the middleware with create_agent": the pieces of a deep
agent are ordinary LangChain middleware, so an agent can take only the ones it needs.
Here LangChain's own `TodoListMiddleware` gives planning, `FilesystemMiddleware` the file
tools (only `ls`, `read_file` and `write_file`, chosen with `tools=`), and
`SubAgentMiddleware` a `task` tool over a subagent given as a spec, which the middleware
compiles itself (a spec used this way names its `model` and `tools`).

Ported to fathom: only the imports change (`deepagents` -> `fathom`); the hosted models
become `ScriptedModel`s, so the example runs offline.

Run: `.venv/bin/python examples/create_agent_composed.py`
"""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import TodoListMiddleware

from fathom.backends import StateBackend
from fathom.middleware import FilesystemMiddleware, SubAgentMiddleware
from fathom.testing import ScriptedModel, ai, tool_call

REPORT_PATH = "/report.md"


def build() -> tuple[Any, ScriptedModel, ScriptedModel]:
    """The agent, its scripted model and the researcher subagent's scripted model."""
    researcher_model = ScriptedModel(replies=[ai("LangGraph 1.0 shipped durable execution.")])
    model = ScriptedModel(
        replies=[
            ai("", tool_call("write_todos", {"todos": [
                {"content": "Ask the researcher", "status": "in_progress"},
                {"content": "Write the report", "status": "pending"},
            ]})),
            ai("", tool_call("task", {"description": "What is new in LangGraph 1.0?",
                                      "subagent_type": "researcher"})),
            ai("", tool_call("write_file", {
                "file_path": REPORT_PATH,
                "content": "# LangGraph 1.0\n\nLangGraph 1.0 shipped durable execution.\n",
            })),
            ai("The report is in /report.md."),
        ]
    )
    backend = StateBackend()
    agent = create_agent(
        model,
        middleware=[
            TodoListMiddleware(),
            FilesystemMiddleware(backend=backend, tools=["ls", "read_file", "write_file"]),
            SubAgentMiddleware(
                backend=backend,
                subagents=[{
                    "name": "researcher",
                    "description": "Looks things up and answers in one sentence.",
                    "system_prompt": "You research one question and answer briefly.",
                    "model": researcher_model,
                    "tools": [],
                }],
            ),
        ],
    )
    return agent, model, researcher_model


def main() -> dict[str, Any]:
    agent, model, researcher_model = build()
    state = agent.invoke({"messages": [{"role": "user", "content": "Report on LangGraph 1.0."}]})
    print("Tools offered:", ", ".join(sorted(model.requests[0].tool_names)))
    print("Researcher answered:", state["messages"][4].content)
    print("Researcher was told:", researcher_model.requests[0].system_prompt)
    print("Report:", state["files"][REPORT_PATH]["content"].splitlines()[0])
    print("Todos:", [todo["content"] for todo in state["todos"]])
    print("Answer:", state["messages"][-1].content)
    return state


if __name__ == "__main__":
    main()
