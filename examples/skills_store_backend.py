"""Skills kept in a LangGraph store, read through `StoreBackend()`.

Deep Agents tutorial, section 3.7 (技能 / Skills, "storebankend" [sic]), repeated in section
13.4 (使用 / Usage, StoreBackend): the `langgraph-docs` SKILL.md is put into an
`InMemoryStore` under the namespace `("filesystem",)` and the key
`/skills/langgraph-docs/SKILL.md`; the agent uses `backend=StoreBackend()`, `store=store` and
`skills=["/skills/"]`. The skill lives in the store, not in the thread, so every thread sees
it (shown here with a second thread).

Ported to fathom: only the imports change (`deepagents` → `fathom`). The hosted model
becomes a `ScriptedModel` that picks the listed skill whose name fits the question, reads its
SKILL.md with `read_file` and follows it (it has no `fetch_url` tool, and says so). The
tutorial downloads SKILL.md from GitHub with `urlopen`; here `skill_content` is the
`langgraph-docs` SKILL.md printed in tutorial section 13.3, kept in
`examples/skills/langgraph-docs/SKILL.md`, so nothing goes over the network.

Run: `.venv/bin/python examples/skills_store_backend.py`
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from fathom import create_deep_agent
from fathom.backends import StoreBackend
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


def ask(agent: Any, llm: ScriptedModel, thread_id: str) -> dict[str, Any]:
    """The tutorial's question on `thread_id`; print what the model saw and did."""
    seen = len(llm.requests)
    result = agent.invoke(
        {
            "messages": [
                {
                    "role": "user",
                    "content": "What is langgraph?",
                }
            ]
        },
        config={"configurable": {"thread_id": thread_id}},
    )
    first = llm.requests[seen]
    listed = [f"{name} ({path})" for name, path in listed_skills(first).items()]
    reads = [
        c["args"]["file_path"]
        for m in result["messages"]
        if isinstance(m, AIMessage)
        for c in m.tool_calls
        if c["name"] == "read_file"
    ]
    body_in_prompt = "## Instructions" in (first.system_prompt or "")
    print(f"thread {thread_id}:")
    print(f"  skills in the system prompt: {listed}")
    print(f"  skill body in the system prompt: {body_in_prompt}")
    print(f"  read_file: {reads}")
    print(f"  answer: {result['messages'][-1].content[:60]}...")
    return {"result": result, "listed": listed, "reads": reads, "body_in_prompt": body_in_prompt}


def main() -> dict[str, Any]:
    from langgraph.store.memory import InMemoryStore

    llm = model()

    store = InMemoryStore()

    # was: skill_url = "https://raw.githubusercontent.com/langchain-ai/deepagents/refs/heads/main/libs/cli/examples/skills/langgraph-docs/SKILL.md"
    #      with urlopen(skill_url) as response:
    #          skill_content = response.read().decode('utf-8')
    skill_content = LANGGRAPH_DOCS_SKILL

    store.put(
        namespace=("filesystem",),
        key="/skills/langgraph-docs/SKILL.md",
        value=create_file_data(skill_content)
    )

    agent = create_deep_agent(
        model=llm,  # was: "google_genai:gemini-3.1-pro-preview"
        backend=StoreBackend(),
        store=store,
        skills=["/skills/"]
    )

    runs = [ask(agent, llm, "12345"), ask(agent, llm, "67890")]
    keys = [(tuple(item.namespace), item.key) for item in store.search(("filesystem",))]
    print(f"in the store: {keys}")
    return {"runs": runs, "store_keys": keys, "requests": llm.requests}


if __name__ == "__main__":
    main()
