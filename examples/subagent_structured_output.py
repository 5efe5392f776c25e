"""Subagent structured output: the parent gets the subagent's result as JSON.

Deep Agents tutorial, section 8.6 (结构化输出): a subagent spec with
`"response_format": ResearchFindings` (a pydantic model). When the subagent finishes, its
structured response is serialized to JSON and becomes the content of the parent's
`ToolMessage`, e.g. `'{"summary": "...", "confidence": 0.87, "sources": ["https://..."]}'`,
so the parent can parse it (`json.loads`) instead of reading free text.

Ported to fathom: only the import changes (`deepagents` → `fathom`). Offline stand-ins:

- `web_search` (not defined in the tutorial) searches a small in-file corpus on quantum
  computing and returns Tavily-shaped results.
- `"claude-sonnet-4-6"` becomes one `ScriptedModel` for both agents (the spec has no
  `model` override, so the subagent uses the main model); its policy tells the two apart by
  the system prompt. As `researcher` it searches, then fills in `ResearchFindings` (LangChain
  offers the schema to a model without native structured output as a tool of that name);
  as the main agent it delegates and then answers from the parsed findings.

The tutorial awaits `agent.ainvoke(...)`; `main()` runs that coroutine with `asyncio.run`.

Run: `.venv/bin/python examples/subagent_structured_output.py`
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from pydantic import BaseModel, Field

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

# --------------------------------------------------------------------------- offline search

CORPUS: list[dict[str, str]] = [
    {
        "title": "Below-threshold quantum error correction",
        "url": "https://example.org/quantum/error-correction-below-threshold",
        "content": (
            "Logical qubits built from larger surface codes now show lower error rates than "
            "smaller ones, the first demonstration of quantum error correction below threshold."
        ),
    },
    {
        "title": "Neutral-atom quantum computers scale up",
        "url": "https://example.org/quantum/neutral-atom-arrays",
        "content": (
            "Neutral-atom processors have reached arrays of more than a thousand qubits with "
            "reconfigurable connectivity."
        ),
    },
    {
        "title": "Logical-qubit algorithms on trapped ions",
        "url": "https://example.org/quantum/trapped-ion-logical-qubits",
        "content": (
            "Trapped-ion quantum computers have run small algorithms on entangled logical "
            "qubits with error rates below those of the physical qubits."
        ),
    },
    {
        "title": "Classical GPUs for deep learning",
        "url": "https://example.org/ai/gpu-training",
        "content": "GPU clusters keep getting larger for training deep learning models.",
    },
]

_STOPWORDS = {"recent", "advances", "in", "the", "a", "of", "on", "research"}


def _terms(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOPWORDS}


def web_search(query: str, max_results: int = 5) -> dict[str, Any]:
    """Search the web and return the best-matching pages."""
    wanted = _terms(query)
    hits = [doc for doc in CORPUS if wanted & _terms(doc["title"] + " " + doc["content"])]
    return {"query": query, "results": hits[:max_results]}


# --------------------------------------------------------------------------- the tutorial


class ResearchFindings(BaseModel):
    """Structured findings from a research task."""

    summary: str = Field(description="Summary of findings")
    confidence: float = Field(description="Confidence score from 0 to 1")
    sources: list[str] = Field(description="List of source URLs")


research_subagent = {
    "name": "researcher",
    "description": "Researches topics and returns structured findings",
    "system_prompt": "Research the given topic thoroughly. Return your findings.",
    "tools": [web_search],
    "response_format": ResearchFindings,
}

# --------------------------------------------------------------------------- scripted model


def researcher_turn(request: ScriptRequest) -> AIMessage:
    """Search once, then report the findings in the ResearchFindings schema."""
    results = request.tool_results
    if not results:
        topic = request.last_human_text
        return ai("", tool_call("web_search", {"query": topic, "max_results": 3}))
    found = json.loads(results[-1].text)["results"]
    findings = {
        "summary": " ".join(doc["content"] for doc in found),
        # more independent sources that agree, more confidence; never certainty
        "confidence": round(min(0.95, 0.6 + 0.1 * len(found)), 2),
        "sources": [doc["url"] for doc in found],
    }
    return ai("", tool_call("ResearchFindings", findings))


def main_turn(request: ScriptRequest) -> AIMessage:
    """Delegate the research; answer from the JSON the researcher returns."""
    results = request.tool_results
    if not results:
        task = request.last_human_text
        return ai("", tool_call("task", {"subagent_type": "researcher", "description": task}))
    findings = json.loads(results[-1].text)
    sources = "\n".join(f"- {url}" for url in findings["sources"])
    return ai(
        f"{findings['summary']}\n\nConfidence: {findings['confidence']:.0%}\nSources:\n{sources}"
    )


def policy(request: ScriptRequest) -> AIMessage:
    if (request.system_prompt or "").startswith(research_subagent["system_prompt"]):
        return researcher_turn(request)
    return main_turn(request)


# --------------------------------------------------------------------------- the run


async def run(model: ScriptedModel) -> dict[str, Any]:
    agent = create_deep_agent(
        model=model,  # was: "claude-sonnet-4-6"
        subagents=[research_subagent],
    )

    result = await agent.ainvoke(
        {"messages": [{"role": "user", "content": "Research recent advances in quantum computing"}]}
    )
    return result


def main() -> dict[str, Any]:
    """Run the agent; return its state, the task's ToolMessage and the parsed findings."""
    model = ScriptedModel(policy=policy)
    result = asyncio.run(run(model))

    # The parent's ToolMessage contains JSON-serialized structured data:
    tool_message = next(m for m in result["messages"] if isinstance(m, ToolMessage))
    print(f"ToolMessage from {tool_message.name!r} (JSON):")
    print(f"  {tool_message.content}")
    parsed = json.loads(tool_message.content)
    print("json.loads:")
    print(f"  keys: {sorted(parsed)}")
    print(f"  confidence: {parsed['confidence']}")
    print(f"  sources: {parsed['sources']}")
    findings = ResearchFindings.model_validate(parsed)
    print(f"valid ResearchFindings: {isinstance(findings, ResearchFindings)}")
    print("\nAnswer:")
    print(result["messages"][-1].content)
    return {
        "state": result,
        "tool_message": tool_message,
        "parsed": parsed,
        "requests": model.requests,
    }


if __name__ == "__main__":
    main()
