"""Router over a multi-source knowledge base: GitHub, Notion and Slack experts.

Multi-agent tutorial 12 (Router multi-source knowledge base): a classifier splits the
question into sub-questions for the relevant sources only, those experts run in parallel,
and a synthesizer merges their answers. Then the stateful variant: the stateless workflow
becomes the `search_knowledge_base` tool of a conversational agent that remembers the
conversation on its thread.

Offline stand-ins: the sources are the tutorial's tool stubs (Notion and Slack strings are
invented), and every model role is one `ScriptedModel` policy that decides from what it is
sent: the classification schema it is offered, the tools bound, the system prompt.

Run: `.venv/bin/python examples/patterns/knowledge_base_router.py`
or with a real model: `... knowledge_base_router.py --model openai:gpt-4.1-mini`
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from langchain.agents import create_agent
from langchain.chat_models import init_chat_model
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.state import CompiledStateGraph

from fathom.patterns.router import Expert, create_router, router_tool
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call
from fathom.usage import AgentUsage

QUERY = "How do I authenticate API requests?"
FOLLOW_UP = "What did the team say about refreshing those tokens?"
THREAD_ID = "user-123"

GITHUB_PROMPT = (
    "You are a GitHub expert. Answer questions about code, API references, and implementation "
    "details by searching repositories, issues, and pull requests."
)
NOTION_PROMPT = (
    "You are a Notion expert. Answer questions about internal processes, policies, and team "
    "documentation by searching the organization's Notion workspace."
)
SLACK_PROMPT = (
    "You are a Slack expert. Answer questions by searching relevant threads and discussions "
    "where team members have shared knowledge and solutions."
)
ASSISTANT_PROMPT = (
    "You are a helpful assistant that answers questions about our organization. Use the "
    "search_knowledge_base tool to find information across our code, documentation, and "
    "team discussions."
)


# --------------------------------------------------------------------------- the sources


def build_tools(log: list[str]) -> dict[str, list[BaseTool]]:
    """The seven source tools, per expert; every call is appended to `log`."""

    @tool
    def search_code(query: str, repo: str = "main") -> str:
        """Search code in GitHub repositories."""
        log.append("search_code")
        return f"Found code matching '{query}' in {repo}: authentication middleware in src/auth.py"

    @tool
    def search_issues(query: str) -> str:
        """Search GitHub issues and pull requests."""
        log.append("search_issues")
        return (
            f"Found 3 issues matching '{query}': #142 (API auth docs), #89 (OAuth flow), "
            "#203 (token refresh)"
        )

    @tool
    def search_prs(query: str) -> str:
        """Search pull requests for implementation details."""
        log.append("search_prs")
        return "PR #156 added JWT authentication, PR #178 updated OAuth scopes"

    @tool
    def search_notion(query: str) -> str:
        """Search Notion workspace for documentation."""
        log.append("search_notion")
        return "API Authentication Guide: covers the OAuth2 flow, API keys, and JWT tokens"

    @tool
    def get_page(page_id: str) -> str:
        """Get a specific Notion page by ID."""
        log.append("get_page")
        return f"Page {page_id}: step-by-step setup for API keys (Settings > API > New key)"

    @tool
    def search_slack(query: str) -> str:
        """Search Slack messages and threads."""
        log.append("search_slack")
        return "#engineering: use Bearer tokens; refresh them before they expire (see #203)"

    @tool
    def get_thread(thread_id: str) -> str:
        """Get a specific Slack thread."""
        log.append("get_thread")
        return f"Thread {thread_id}: the refresh job runs every 50 minutes for 60-minute tokens"

    return {
        "github": [search_code, search_issues, search_prs],
        "notion": [search_notion, get_page],
        "slack": [search_slack, get_thread],
    }


# --------------------------------------------------------------------------- offline model

# Which words send a question to which source, and how each source's sub-question is put.
SOURCE_WORDS = {
    "github": {"api", "code", "authenticate", "implement", "endpoint", "pr", "bug"},
    "notion": {"how", "authenticate", "guide", "process", "policy", "docs", "onboarding"},
    "slack": {"team", "discuss", "discussed", "said", "say", "slack", "channel"},
}
SUB_QUESTIONS = {
    "github": "Which code, issues and PRs handle: {topic}?",
    "notion": "What do our guides say about: {topic}?",
    "slack": "What has the team discussed about: {topic}?",
}
# Question words, and the words of the sub-question templates: what is left is the topic.
FILLER = {
    "a", "about", "and", "code", "did", "discussed", "do", "guides", "handle", "has", "how",
    "i", "issues", "our", "prs", "say", "team", "the", "those", "what", "which",
}


def _topic(text: str) -> str:
    return " ".join(w for w in re.findall(r"[\w-]+", text) if w.lower() not in FILLER)


def _classify(request: ScriptRequest) -> AIMessage:
    question = request.last_human_text
    words = set(re.findall(r"[a-z]+", question.lower()))
    chosen = [
        {"source": source, "query": SUB_QUESTIONS[source].format(topic=_topic(question))}
        for source, keys in SOURCE_WORDS.items()
        if words & keys
    ]
    return ai("", tool_call("ClassificationResult", {"classifications": chosen}))


def _expert(request: ScriptRequest) -> AIMessage | str:
    results = request.tool_results
    if not results:
        searches = [name for name in request.tool_names if name.startswith("search_")]
        query = _topic(request.last_human_text)
        return ai("", *(tool_call(name, {"query": query}) for name in searches))
    return "\n".join(f"- {r.text}" for r in results)


def _synthesize(request: ScriptRequest) -> str:
    question = re.search(r'"(.*)"', request.system_prompt or "")
    sources = re.findall(r"^\*\*From (.+?):\*\*$", request.last_human_text, re.MULTILINE)
    points: list[str] = []
    for line in request.last_human_text.splitlines():
        if line.startswith("- ") and line not in points:
            points.append(line)
    heading = f"To answer \"{question.group(1) if question else ''}\" "
    return heading + f"(from {' and '.join(sources)}):\n" + "\n".join(points)


def _assistant(request: ScriptRequest) -> AIMessage | str:
    last = request.last_message
    if isinstance(last, HumanMessage):
        return ai("", tool_call("search_knowledge_base", {"query": last.text}))
    asked = [m.text for m in request.messages if isinstance(m, HumanMessage)]
    answer = last.text if isinstance(last, ToolMessage) else ""
    if len(asked) > 1:
        return f'Following up on your earlier question ("{asked[0]}"):\n{answer}'
    return answer


def knowledge_base_policy(request: ScriptRequest) -> AIMessage | str:
    """Answer as whichever role the request is for: classifier, expert, synthesizer, assistant."""
    if request.has_tool("ClassificationResult"):
        return _classify(request)
    if request.has_tool("search_knowledge_base"):
        return _assistant(request)
    if request.tool_names:
        return _expert(request)
    return _synthesize(request)


# --------------------------------------------------------------------------- the example


def build_workflow(model: BaseChatModel, log: list[str]) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The router: GitHub, Notion and Slack agents over their tools, one model for all roles."""
    tools = build_tools(log)
    prompts = {"github": GITHUB_PROMPT, "notion": NOTION_PROMPT, "slack": SLACK_PROMPT}
    descriptions = {
        "github": "Code, API references, implementation details, issues and pull requests.",
        "notion": "Internal documentation, processes, policies and team wikis.",
        "slack": "Team discussions, informal knowledge sharing and recent conversations.",
    }
    titles = {"github": "GitHub", "notion": "Notion", "slack": "Slack"}
    experts = [
        Expert(
            source,
            descriptions[source],
            create_agent(model, tools=tools[source], system_prompt=prompts[source]),
            title=titles[source],
        )
        for source in ("github", "notion", "slack")
    ]
    return create_router(model, experts)


def _counts(calls: dict[str, int]) -> str:
    # Sorted: experts run concurrently, so the order of their first calls varies.
    return ", ".join(f"{name}={n}" for name, n in sorted(calls.items()))


def main(model: BaseChatModel | None = None) -> dict[str, Any]:
    """Run the tutorial query, then two turns of the stateful variant; return what happened."""
    model = model or ScriptedModel(policy=knowledge_base_policy)
    log: list[str] = []
    workflow = build_workflow(model, log)

    usage = AgentUsage()
    result = workflow.invoke({"query": QUERY}, {"callbacks": [usage]})
    print(f"Query: {QUERY}\n")
    print("Classifications:")
    for c in result["classifications"]:
        print(f"  {c['source']}: {c['query']}")
    print(f"\nFinal answer:\n{result['final_answer']}\n")
    calls = {name: totals.calls for name, totals in usage.totals().items()}
    print(f"Model calls per role: {_counts(calls)}")
    ran = [r["source"] for r in result["results"]]
    idle = [name for name in ("github", "notion", "slack") if name not in ran]
    print(f"Experts that ran: {', '.join(ran)}; never started: {', '.join(idle) or 'none'}")
    tools_called = sorted(log)
    print(f"Source tools called: {', '.join(tools_called)}")

    print(f"\n--- Stateful: a conversational agent with search_knowledge_base ({THREAD_ID}) ---")
    assistant = create_agent(
        model,
        tools=[router_tool(workflow)],
        system_prompt=ASSISTANT_PROMPT,
        checkpointer=InMemorySaver(),
        name="assistant",
    )
    turn_usage = AgentUsage()
    config: dict[str, Any] = {
        "configurable": {"thread_id": THREAD_ID},
        "callbacks": [turn_usage],
    }
    answers: list[str] = []
    for question in (QUERY, FOLLOW_UP):
        state = assistant.invoke({"messages": [HumanMessage(question)]}, config)
        answers.append(state["messages"][-1].text)
        print(f"User: {question}\nAssistant: {answers[-1]}")
    kept = len(assistant.get_state(config).values["messages"])
    print(f"Messages kept on thread {THREAD_ID}: {kept}")
    turn_calls = {name: totals.calls for name, totals in turn_usage.totals().items()}
    print(f"Model calls over both turns: {_counts(turn_calls)}")

    return {
        "classifications": result["classifications"],
        "results": result["results"],
        "final_answer": result["final_answer"],
        "calls": calls,
        "tools_called": tools_called,
        "answers": answers,
        "thread_messages": kept,
        "turn_calls": turn_calls,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model", help="a real model as provider:model (default: the offline scripted model)"
    )
    args = parser.parse_args()
    main(init_chat_model(args.model) if args.model else None)
