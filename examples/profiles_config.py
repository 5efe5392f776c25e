"""A harness profile kept in a YAML file, and the general-purpose subagent it changes.

Deep Agents tutorial, section on profiles (configuration files): a `HarnessProfileConfig`
holds the declarative part of a harness profile (prompt suffix, tool descriptions, hidden
tools, removed middleware, the default general-purpose subagent's description and
prompt), so it can live in a YAML or JSON file and be registered like a `HarnessProfile`.

Ported to fathom: only the import changes (`deepagents` → `fathom`). The model is
`"openai:scripted"`, served by a local `ScriptedOpenAIServer`; the provider profile (a
plain mapping here) supplies its `base_url` and `api_key`.

Run: `.venv/bin/python examples/profiles_config.py`
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from fathom import (
    HarnessProfileConfig,
    create_deep_agent,
    register_harness_profile,
    register_provider_profile,
)
from fathom.testing import ScriptedModel, ScriptedOpenAIServer, ScriptRequest

PROFILE_YAML = """\
system_prompt_suffix: Cite the file you read for every claim.
tool_description_overrides:
  task: "Hand a self-contained job to a helper. Helpers: {available_agents}"
excluded_tools: [execute, grep]
excluded_middleware: [SummarizationMiddleware]
general_purpose_subagent:
  description: A helper for research jobs.
  system_prompt: You research one question and answer in a paragraph.
"""


def describe_request(request: ScriptRequest) -> str:
    """Say what the model was given."""
    prompt = request.system_prompt or ""
    tools = {t["function"]["name"]: t["function"]["description"] for t in request.tools}
    return (
        f"Suffix present: {'Cite the file you read for every claim.' in prompt}\n"
        f"Tools hidden: {sorted({'execute', 'grep'} - set(tools)) == ['execute', 'grep']}\n"
        f"Helper listed: {'research jobs' in tools['task']}"
    )


def main() -> dict[str, Any]:
    """Write the profile file, register it, run the agent once and return its state."""
    scripted = ScriptedModel(policy=describe_request)
    with tempfile.TemporaryDirectory() as tmp, ScriptedOpenAIServer(scripted) as server:
        path = Path(tmp) / "openai-scripted.yaml"
        path.write_text(PROFILE_YAML, encoding="utf-8")
        register_provider_profile(
            "openai", {"init_kwargs": {"base_url": server.base_url, "api_key": "scripted"}}
        )
        register_harness_profile("openai:scripted", HarnessProfileConfig.from_file(path))
        agent = create_deep_agent(model="openai:scripted")
        result = agent.invoke({"messages": [{"role": "user", "content": "What do you see?"}]})
    print(result["messages"][-1].content)
    return result


if __name__ == "__main__":
    main()
