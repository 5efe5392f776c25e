"""Skills put into the default `StateBackend` with `invoke({"files": ...})`.

Deep Agents tutorial, section 3.7 (技能 / Skills, "statebackend"), repeated in section 13.4
(使用 / Usage, StateBackend): the `langgraph-docs` skill is put into the agent's in-state
filesystem as `/skills/langgraph-docs/SKILL.md` (built with `create_file_data`), and
`create_deep_agent(skills=["/skills/"])` lists it in the system prompt. Only the skill's name,
description and path are in the prompt; the model reads the SKILL.md itself with `read_file`
when the question fits the description (progressive disclosure).

Ported to fathom: only the imports change (`deepagents` → `fathom`). The hosted model
becomes a `ScriptedModel` that acts like a sensible model: it picks the listed skill whose
name fits the question, reads its SKILL.md and follows it. The skill asks for a `fetch_url`
tool that this agent does not have (the tutorial gives it none), so the model says so and
answers from what it knows. The tutorial downloads SKILL.md from GitHub with `urlopen`; here
`skill_content` is the `langgraph-docs` SKILL.md printed in tutorial section 13.3, kept in
`examples/skills/langgraph-docs/SKILL.md`, so nothing goes over the network.

Run: `.venv/bin/python examples/skills_state_backend.py`
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import MemorySaver

from fathom import create_deep_agent
from fathom.backends.utils import create_file_data
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

# The SKILL.md the tutorial fetches (its text as printed in tutorial section 13.3),
# kept beside the examples in the tutorial's skill-folder layout.
LANGGRAPH_DOCS_SKILL = (
    Path(__file__).parent / "skills" / "langgraph-docs" / "SKILL.md"
).read_text(encoding="utf-8")

LANGGRAPH_ANSWER = (
    "LangGraph is a low-level orchestration framework for building stateful, long-running "
    "agents as graphs of steps, with persistence, streaming and human-in-the-loop built in."
)

SKILL_LINE = re.compile(r"^- (\S+) \(`(.+?SKILL\.md)`\): (.*)$", re.MULTILINE)


def listed_skills(request: ScriptRequest) -> dict[str, str]:
    """Skill name → SKILL.md path, as the skills section of the system prompt lists them."""
    return {m[1]: m[2] for m in SKILL_LINE.finditer(request.system_prompt or "")}


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower()))


def skill_policy(request: ScriptRequest) -> AIMessage:
    """Read the skill whose name fits the question, then follow it with the tools at hand."""
    read = next((m for m in reversed(request.messages) if isinstance(m, ToolMessage)), None)
    if read is None:
        question = words(request.last_human_text)
        for name, path in listed_skills(request).items():
            if words(name) & question:
                return ai("", tool_call("read_file", {"file_path": path}))
        return ai("I have no skill for that.")
    if "fetch_url" in read.text and not request.has_tool("fetch_url"):
        return ai(
            f"{LANGGRAPH_ANSWER} (The langgraph-docs skill says to fetch "
            "https://docs.langchain.com/llms.txt with fetch_url; this agent has no fetch_url "
            "tool, so this answer is not checked against the docs.)"
        )
    return ai(LANGGRAPH_ANSWER)


def model() -> ScriptedModel:
    return ScriptedModel(policy=skill_policy)


def report(llm: ScriptedModel, result: dict[str, Any]) -> dict[str, Any]:
    """Print what the model was shown and did; return it for the tests."""
    first = llm.requests[0].system_prompt or ""
    listed = [f"{name} ({path})" for name, path in listed_skills(llm.requests[0]).items()]
    calls = [
        f"{c['name']}({c['args']['file_path']!r})"
        for m in result["messages"]
        if isinstance(m, AIMessage)
        for c in m.tool_calls
    ]
    body_in_prompt = "## Instructions" in first
    body_read = any(
        isinstance(m, ToolMessage) and "### 1. Fetch the Documentation Index" in m.text
        for m in result["messages"]
    )
    print(f"skills in the system prompt: {listed}")
    print(f"skill body in the first system prompt: {body_in_prompt}")
    print(f"tool calls: {calls}")
    print(f"skill body in the conversation after read_file: {body_read}")
    print(f"answer: {result['messages'][-1].content}")
    return {
        "result": result,
        "listed": listed,
        "calls": calls,
        "body_in_prompt": body_in_prompt,
        "body_read": body_read,
        "requests": llm.requests,
    }


def main() -> dict[str, Any]:
    llm = model()

    checkpointer = MemorySaver()

    # was: skill_url = "https://raw.githubusercontent.com/langchain-ai/deepagents/refs/heads/main/libs/cli/examples/skills/langgraph-docs/SKILL.md"
    #      with urlopen(skill_url) as response:
    #          skill_content = response.read().decode('utf-8')
    skill_content = LANGGRAPH_DOCS_SKILL

    skills_files = {
        "/skills/langgraph-docs/SKILL.md": create_file_data(skill_content)
    }

    agent = create_deep_agent(
        model=llm,  # was: "google_genai:gemini-3.1-pro-preview"
        skills=["/skills/"],
        checkpointer=checkpointer,
    )

    result = agent.invoke(
        {
            "messages": [
                {
                    "role": "user",
                    "content": "What is langgraph?",
                }
            ],
            # Fill the default StateBackend's in-state filesystem (virtual paths must start with "/").  # noqa: E501
            "files": skills_files
        },
        config={"configurable": {"thread_id": "12345"}},
    )
    return report(llm, result)


if __name__ == "__main__":
    main()
