"""The general-purpose subagent: use it, replace it, turn it off.

Deep Agents tutorial, section 8.7 (通用子智能体), with section 8.2 (默认子代理): every deep
agent has a `general-purpose` subagent with the main agent's tools and model, and its own
system prompt and description.
Instead of running ten searches itself, the main agent hands the work to it
(`task(subagent_type="general-purpose", description="调研量子计算的发展趋势")`) and gets
back only a short summary. A subagent named `"general-purpose"` in `subagents` replaces the
default one (the tutorial's example: main agent on Gemini, general-purpose subagent on
`"openai:gpt-5.4"`). Without any synchronous subagent there is no `task` tool.

Ported to fathom: only the import changes (`deepagents` → `fathom`). Other changes:

- The hosted models become `ScriptedModel`s with one policy: a model that is offered the
  `task` tool delegates research to `general-purpose` and relays its summary; a model
  without it (the subagent, or an agent without subagents) runs three searches and writes
  the summary itself. `internet_search` runs over a small in-file corpus.
- The tutorial writes the call as `task(name="general-purpose", task="...")`; the `task`
  tool's arguments are `subagent_type` and `description` (as in its section 16.8).
- The tutorial renames or removes the default subagent through a harness profile
  (`GeneralPurposeSubagentProfile(enabled=False)`). fathom has no harness profiles; its
  switch is the `create_deep_agent(..., general_purpose_subagent=False)` parameter.

Run: `.venv/bin/python examples/general_purpose_subagent.py`
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from langchain_core.messages import AIMessage, ToolMessage

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

# --------------------------------------------------------------------------- offline search

CORPUS: list[dict[str, str]] = [
    {
        "title": "Quantum error correction passes the threshold",
        "url": "https://example.org/quantum/error-correction",
        "topic": "general",
        "content": "Error correction now makes logical qubits better than physical ones.",
    },
    {
        "title": "Quantum hardware: more and better qubits",
        "url": "https://example.org/quantum/hardware",
        "topic": "general",
        "content": "Neutral-atom and trapped-ion hardware is scaling past a thousand qubits.",
    },
    {
        "title": "Quantum computing applications",
        "url": "https://example.org/quantum/applications",
        "topic": "general",
        "content": "Chemistry and materials simulation are the first expected applications.",
    },
    {
        "title": "Post-quantum cryptography standards published",
        "url": "https://example.org/news/pqc-standards",
        "topic": "news",
        "content": "New post-quantum cryptography standards prepare for future quantum computing.",
    },
]


def _terms(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower())) - {"and", "the", "of", "a"}


def internet_search(
    query: str,
    max_results: int = 5,
    topic: Literal["general", "news", "finance"] = "general",
    include_raw_content: bool = False,
):
    """Run a web search"""
    wanted = _terms(query)
    hits = [
        {key: doc[key] for key in ("title", "url", "content")}
        for doc in CORPUS
        if doc["topic"] == topic and wanted <= _terms(doc["title"] + " " + doc["content"])
    ]
    return {"query": query, "results": hits[:max_results]}


# --------------------------------------------------------------------------- scripted models

TASK = "调研量子计算的发展趋势"  # "research the trends in quantum computing"
QUERIES = [
    {"query": "quantum error correction", "max_results": 2},
    {"query": "quantum hardware qubits", "max_results": 2},
    {"query": "quantum computing", "max_results": 2, "topic": "news"},
]


def research_yourself(request: ScriptRequest) -> AIMessage:
    """Without a task tool: run the searches (in one step), then write the summary."""
    results = request.tool_results
    if not results:
        return ai("", *(tool_call("internet_search", args) for args in QUERIES))
    found = [r for message in results for r in json.loads(message.text)["results"]]
    lines = ["量子计算的发展趋势 (trends in quantum computing):"]
    lines += [f"- {r['content']} ({r['url']})" for r in found]
    return ai("\n".join(lines))


def policy(request: ScriptRequest) -> AIMessage:
    if "task" not in request.tool_names:
        return research_yourself(request)
    results = request.tool_results
    if not results:
        return ai(
            "Many searches ahead: I'll delegate them to keep my context clean.",
            tool_call("task", {"subagent_type": "general-purpose", "description": TASK}),
        )
    return ai(f"Summary from the general-purpose subagent:\n{results[-1].text}")


def model(name: str) -> ScriptedModel:
    return ScriptedModel(policy=policy, model_name=name)


# --------------------------------------------------------------------------- helpers


def ask(agent: Any) -> dict[str, Any]:
    return agent.invoke({"messages": [{"role": "user", "content": TASK}]})


def searches_in_main_context(state: dict[str, Any]) -> int:
    return sum(
        1 for m in state["messages"] if isinstance(m, ToolMessage) and m.name == "internet_search"
    )


def task_catalogue(request: Any) -> list[str]:
    """The `- name: description` lines of the task tool offered in `request`."""
    for spec in request.tools:
        if spec["function"]["name"] == "task":
            description = spec["function"]["description"]
            return [line[2:] for line in description.splitlines() if line.startswith("- ")]
    return []


def show(requests: list[Any], label: str, who: str | None = None) -> None:
    """One line per model call: which agent made it and what the model answered."""
    for request in requests:
        if who is None:
            agent = "main agent" if "task" in request.tool_names else "general-purpose"
        else:
            agent = who
        calls = request.response.tool_calls
        did = ", ".join(f"{c['name']}({c['args']})" for c in calls) if calls else "answers"
        print(f"  {label} {agent}: {did}")


# --------------------------------------------------------------------------- the run


def default_subagent() -> dict[str, Any]:
    """Every deep agent has `general-purpose`: the main agent's tools and model, its own prompt."""
    shared = model("gemini-3.1-pro-preview")
    agent = create_deep_agent(model=shared, tools=[internet_search])
    state = ask(agent)
    requests = shared.requests
    show(requests, "[gemini]")
    main_request = requests[0]
    sub_request = next(r for r in requests if "task" not in r.tool_names)
    own_prompt = sub_request.system_prompt != main_request.system_prompt
    # the main agent's tools, less `task` and the main agent's own planning (`write_todos`)
    same_tools = sub_request.tool_names == [
        n for n in main_request.tool_names if n not in ("task", "write_todos")
    ]
    names = [line.split(":")[0] for line in task_catalogue(main_request)]
    print(f"  task tool lists: {names}")
    print(f"  general-purpose has its own system prompt: {own_prompt}")
    print(f"  general-purpose has the main agent's tools (without task, write_todos): {same_tools}")
    print(f"  search results in the main agent's context: {searches_in_main_context(state)}")
    print("  answer: " + state["messages"][-1].content.replace("\n", "\n  | "))
    return {
        "state": state,
        "requests": requests,
        "own_prompt": own_prompt,
        "same_tools": same_tools,
    }


def replaced_subagent() -> dict[str, Any]:
    """A spec named "general-purpose" replaces the default one (here: on another model)."""
    gemini, gpt = model("gemini-3.1-pro-preview"), model("gpt-5.4")

    # Main agent uses Gemini; general-purpose subagent uses GPT
    agent = create_deep_agent(
        model=gemini,  # was: "google_genai:gemini-3.1-pro-preview"
        tools=[internet_search],
        subagents=[
            {
                "name": "general-purpose",
                "description": "General-purpose agent for research and multi-step tasks",
                "system_prompt": "You are a general-purpose assistant.",
                "tools": [internet_search],
                "model": gpt,  # was: "openai:gpt-5.4"  # Different model for delegated tasks
            },
        ],
    )
    state = ask(agent)
    show(gemini.requests, "[gemini]")
    show(gpt.requests, "[gpt-5.4]")
    catalogue = task_catalogue(gemini.requests[0])
    print(f"  task tool lists: {catalogue}")
    print(f"  general-purpose system prompt: {gpt.requests[0].system_prompt.splitlines()[0]!r}")
    print(f"  model calls: gemini {gemini.calls}, gpt-5.4 {gpt.calls}")
    return {
        "state": state,
        "main_requests": gemini.requests,
        "subagent_requests": gpt.requests,
        "catalogue": catalogue,
    }


def no_subagent() -> dict[str, Any]:
    """`general_purpose_subagent=False` and no other subagents: no task tool at all."""
    alone = model("gemini-3.1-pro-preview")
    agent = create_deep_agent(model=alone, tools=[internet_search], general_purpose_subagent=False)
    state = ask(agent)
    tools = alone.requests[0].tool_names
    print(f"  tools offered: {tools}")
    print(f"  task offered: {'task' in tools}")
    show(alone.requests, "[gemini]", who="main agent")
    print(f"  search results in the main agent's context: {searches_in_main_context(state)}")

    # With another subagent left, the task tool stays and lists only that one.
    other = ScriptedModel(replies=["Hello!"])
    researcher = {
        "name": "researcher",
        "description": "Researches a topic in depth",
        "system_prompt": "You are a researcher.",
    }
    create_deep_agent(
        model=other,
        tools=[internet_search],
        subagents=[researcher],
        general_purpose_subagent=False,
    ).invoke({"messages": [{"role": "user", "content": "hi"}]})
    catalogue = task_catalogue(other.requests[0])
    print(f"  with a 'researcher' subagent, task lists: {catalogue}")
    return {"state": state, "tools": tools, "requests": alone.requests, "catalogue": catalogue}


def main() -> dict[str, Any]:
    """Run the three set-ups on the same task; return what each offered and did."""
    print(f"User: {TASK}")
    print("1. default general-purpose subagent:")
    default = default_subagent()
    print("2. replaced by a spec named 'general-purpose' on another model:")
    replaced = replaced_subagent()
    print("3. general_purpose_subagent=False:")
    off = no_subagent()
    return {"default": default, "replaced": replaced, "off": off}


if __name__ == "__main__":
    main()
