"""Runtime context in subagents, per-subagent settings, and which agent called a tool.

Deep Agents tutorial, section 8.8.7 (上下文管理):

1. The runtime `context` given to the parent's `invoke` / `ainvoke` reaches every subagent
   and its tools: `get_user_data(query, runtime: ToolRuntime[Context])` reads
   `runtime.context.user_id` inside the `researcher` subagent.
2. Settings for one subagent: dedicated fields in the context type
   (`researcher_max_depth`, `fact_checker_strict_mode`), or namespaced keys in a flat
   context mapping, prefixed with the subagent's name (`"researcher:max_depth"`).
3. A tool shared by the parent and several subagents finds out which agent called it from
   `runtime.config["metadata"]["lc_agent_name"]` (`shared_lookup`: strict for
   `fact-checker`, general otherwise; `flexible_search`: `researcher_max_depth` results
   for `researcher`, 5 otherwise).

Ported to fathom: only the import changes (`deepagents` → `fathom`). Other changes:

- The hosted model becomes one `ScriptedModel` shared by all agents; its policy tells them
  apart by their system prompts.
- The tutorial writes `result = await agent.invoke(...)`; `invoke` is not awaitable, so the
  port awaits `agent.ainvoke(...)` (run with `asyncio.run`).
- `strict_verification`, `basic_verification`, `strict_lookup`, `general_lookup` and
  `perform_search` are not defined in the tutorial; here they are small offline functions.
- The tutorial shows the two context types (`user_id`/`session_id`, then the per-agent
  fields) in separate snippets; part 2 builds its own agent for the second one, with
  `shared_lookup` given to the main agent and both subagents, and `name="main-agent"`.
- fathom addition: `AgentUsage` (from `fathom.usage`) as a callback counts the model calls
  of each agent by `lc_agent_name`. The example's own `ToolLog` callback prints each tool
  result under the `lc_agent_name` of the agent that ran the tool.
- The tutorial's `shared_lookup` annotates a bare `ToolRuntime`; LangChain then types its
  context as `None` and pydantic warns ("Pydantic serializer warnings") when the tool input
  is serialized with a real context. The call works; part 2 silences that one warning.

Run: `.venv/bin/python examples/subagent_context.py`
"""

from __future__ import annotations

import asyncio
import warnings
from dataclasses import dataclass
from typing import Any
from uuid import UUID

from langchain.messages import HumanMessage
from langchain.tools import ToolRuntime, tool
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call
from fathom.usage import UNNAMED_AGENT, AgentUsage

# --------------------------------------------------------------------------- part 1


@dataclass
class Context:
    user_id: str
    session_id: str


@tool
def get_user_data(query: str, runtime: ToolRuntime[Context]) -> str:
    """Fetch data for the current user."""
    user_id = runtime.context.user_id
    return f"Data for user {user_id}: {query}"


research_subagent = {
    "name": "researcher",
    "description": "Conducts research for the current user",
    "system_prompt": "You are a research assistant.",
    "tools": [get_user_data],
}

# --------------------------------------------------------------------------- part 2 helpers

FACTS = {
    "the eiffel tower is in paris": "confirmed by 3 independent sources",
    "the eiffel tower was finished in 1889": "confirmed by 2 independent sources",
}
PAGES = ["tower, Paris", "finished 1889", "World's Fair 1889", "330 m tall", "G. Eiffel"]


def strict_verification(claim: str) -> str:
    found = FACTS.get(claim.lower().rstrip("."))
    verdict = f"verified, {found}" if found else "NOT verified: no independent source"
    return f"strict check of {claim!r}: {verdict}"


def basic_verification(claim: str) -> str:
    return f"basic check of {claim!r}: plausible"


def strict_lookup(query: str) -> str:
    return f"strict lookup (primary sources only): {PAGES[0]}"


def general_lookup(query: str) -> str:
    return f"general lookup: {PAGES[0]}; {PAGES[1]}"


def perform_search(query: str, max_results: int, include_raw: bool) -> str:
    return f"{max_results} results: " + "; ".join(PAGES[:max_results])


# --------------------------------------------------------------------------- part 2: fields


@dataclass
class AgentContext:  # the tutorial's second `Context`
    user_id: str
    researcher_max_depth: int | None = None
    fact_checker_strict_mode: bool | None = None


@tool
def verify_claim(claim: str, runtime: ToolRuntime[AgentContext]) -> str:
    """Verify a factual claim."""
    strict_mode = runtime.context.fact_checker_strict_mode or False
    if strict_mode:
        return strict_verification(claim)
    return basic_verification(claim)


@tool
def shared_lookup(query: str, runtime: ToolRuntime) -> str:
    """Look up information."""
    agent_name = runtime.config.get("metadata", {}).get("lc_agent_name")
    if agent_name == "fact-checker":
        return strict_lookup(query)
    return general_lookup(query)


@tool
def flexible_search(query: str, runtime: ToolRuntime[AgentContext]) -> str:
    """Search with agent-specific settings."""
    agent_name = runtime.config.get("metadata", {}).get("lc_agent_name", "unknown")
    ctx = runtime.context
    if agent_name == "researcher":  # noqa: SIM108  (the tutorial's code)
        max_results = ctx.researcher_max_depth or 5
    else:
        max_results = 5
    include_raw = False

    return perform_search(query, max_results=max_results, include_raw=include_raw)


# --------------------------------------------------------------------------- part 3: keys


@tool
def depth_search(query: str, runtime: ToolRuntime[dict[str, Any]]) -> str:
    """Search as deep as the calling agent's `<name>:max_depth` setting allows."""
    agent_name = runtime.config.get("metadata", {}).get("lc_agent_name", "unknown")
    max_results = runtime.context.get(f"{agent_name}:max_depth", 5)
    return perform_search(query, max_results=max_results, include_raw=False)


# --------------------------------------------------------------------------- scripted model

MAIN_PROMPT = "You coordinate research and fact-checking. Delegate with the task tool."
PROMPTS = {
    "researcher": "You are a research assistant.",
    "fact-checker": "You are a fact-checker. Verify every claim you are given.",
}
CLAIMS = ["The Eiffel Tower was finished in 1889.", "The Eiffel Tower is 500 m tall."]
OWN_TOOLS = ("get_user_data", "shared_lookup", "flexible_search", "depth_search")


def _agent_of(request: ScriptRequest) -> str:
    prompt = request.system_prompt or ""
    return next((name for name, text in PROMPTS.items() if prompt.startswith(text)), "main")


def _report(results: list[Any]) -> AIMessage:
    return ai("\n".join(m.text for m in results))


def researcher_turn(request: ScriptRequest) -> AIMessage:
    """Use each of its own tools once on the task, then report what they returned."""
    if request.tool_results:
        return _report(request.tool_results)
    task = request.last_human_text
    return ai("", *(tool_call(n, {"query": task}) for n in request.tool_names if n in OWN_TOOLS))


def fact_checker_turn(request: ScriptRequest) -> AIMessage:
    """Verify the claim and look it up, then report both."""
    if request.tool_results:
        return _report(request.tool_results)
    claim = request.last_human_text
    return ai(
        "",
        tool_call("verify_claim", {"claim": claim}),
        tool_call("shared_lookup", {"query": claim}),
    )


def main_turn(request: ScriptRequest) -> AIMessage:
    """Look things up with its own tools and delegate research; then have claims checked."""
    text = request.last_human_text
    done = [m for m in request.messages if m.type == "tool"]
    if not done:
        topic, task = text, text
        if "Eiffel" in text:
            topic, task = "Eiffel Tower", "Eiffel Tower: when it was finished, how tall it is"
        own = [tool_call(n, {"query": topic}) for n in request.tool_names if n in OWN_TOOLS]
        research = tool_call("task", {"subagent_type": "researcher", "description": task})
        return ai("", *own, research)
    checked = any(
        c["args"].get("subagent_type") == "fact-checker"
        for m in request.messages
        if isinstance(m, AIMessage)
        for c in m.tool_calls
    )
    if "verify" in text and not checked:
        return ai(
            "",
            *(
                tool_call("task", {"subagent_type": "fact-checker", "description": claim})
                for claim in CLAIMS
            ),
        )
    return _report([m for m in done if m.name == "task"])


def policy(request: ScriptRequest) -> AIMessage:
    agent = _agent_of(request)
    if agent == "researcher":
        return researcher_turn(request)
    if agent == "fact-checker":
        return fact_checker_turn(request)
    return main_turn(request)


# --------------------------------------------------------------------------- the run


class ToolLog(BaseCallbackHandler):
    """Records every tool result with the `lc_agent_name` of the agent that ran the tool."""

    def __init__(self) -> None:
        self._started: dict[UUID, tuple[str, str]] = {}
        self.rows: list[tuple[str, str, str]] = []

    def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        agent = (metadata or {}).get("lc_agent_name") or UNNAMED_AGENT
        self._started[run_id] = (agent, serialized.get("name") or "?")

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        agent, name = self._started.pop(run_id, ("?", "?"))
        if name != "task":
            self.rows.append((agent, name, str(getattr(output, "content", output))))

    def show(self) -> None:
        order = {UNNAMED_AGENT: 0, "main-agent": 0, "researcher": 1, "fact-checker": 2}
        for agent, name, text in sorted(self.rows, key=lambda r: (order.get(r[0], 3), r[1:])):
            print(f"  [{agent}] {name} -> {text}")


async def context_reaches_subagents() -> dict[str, Any]:
    """Part 1: the tutorial's Context, researcher and get_user_data."""
    model = ScriptedModel(policy=policy)  # was: "google_genai:gemini-3.1-pro-preview"
    agent = create_deep_agent(
        model=model,
        subagents=[research_subagent],
        context_schema=Context,
    )

    # Context flows to the researcher subagent and its tools automatically
    log = ToolLog()
    result = await agent.ainvoke(  # the tutorial: `await agent.invoke(...)`
        {"messages": [HumanMessage("Look up my recent activity")]},
        context=Context(user_id="user-123", session_id="abc"),
        config={"callbacks": [log]},
    )
    log.show()
    print(f"  answer: {result['messages'][-1].content}")
    return {"state": result, "tool_rows": log.rows}


async def per_agent_settings() -> dict[str, Any]:
    """Part 2: dedicated context fields, and lc_agent_name in shared tools."""
    model = ScriptedModel(policy=policy)
    agent = create_deep_agent(
        model=model,
        tools=[shared_lookup, flexible_search],
        system_prompt=MAIN_PROMPT,
        subagents=[
            {**research_subagent, "tools": [flexible_search, shared_lookup]},
            {
                "name": "fact-checker",
                "description": "Verifies one factual claim",
                "system_prompt": PROMPTS["fact-checker"],
                "tools": [verify_claim, shared_lookup],
            },
        ],
        context_schema=AgentContext,
        name="main-agent",
    )
    log, usage = ToolLog(), AgentUsage()
    with warnings.catch_warnings():
        # LangChain types the bare `ToolRuntime` of shared_lookup as having no context, so
        # pydantic warns when it serializes that tool's input; the call itself is fine.
        warnings.filterwarnings("ignore", "Pydantic serializer warnings", UserWarning)
        result = await agent.ainvoke(
            {"messages": [HumanMessage("Research the Eiffel Tower and verify the claims")]},
            context=AgentContext(
                user_id="user-123",
                researcher_max_depth=3,
                fact_checker_strict_mode=True,
            ),
            config={"callbacks": [log, usage]},
        )
    log.show()
    calls = {name: totals.calls for name, totals in usage.totals().items()}
    print(f"  model calls per agent (AgentUsage): {calls}")
    return {"state": result, "tool_rows": log.rows, "calls": calls}


async def namespaced_keys() -> dict[str, Any]:
    """Part 3: a flat context mapping with `<subagent>:<setting>` keys."""
    model = ScriptedModel(policy=policy)
    agent = create_deep_agent(
        model=model,
        tools=[depth_search],
        subagents=[{**research_subagent, "tools": [depth_search]}],
        name="main-agent",
    )
    log = ToolLog()
    result = await agent.ainvoke(
        {"messages": [HumanMessage("Research the Eiffel Tower")]},
        context={"user_id": "user-123", "researcher:max_depth": 2},
        config={"callbacks": [log]},
    )
    log.show()
    return {"state": result, "tool_rows": log.rows}


async def run_all() -> dict[str, Any]:
    print("1. runtime context reaches the subagent's tools:")
    first = await context_reaches_subagents()
    print("2. per-subagent context fields; shared tools branch on lc_agent_name:")
    second = await per_agent_settings()
    print("3. namespaced keys in a flat context mapping ('researcher:max_depth'):")
    third = await namespaced_keys()
    return {"context": first, "fields": second, "namespaced": third}


def main() -> dict[str, Any]:
    """Run the three parts; return each one's state and the tool results per agent."""
    return asyncio.run(run_all())


if __name__ == "__main__":
    main()
