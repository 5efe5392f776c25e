"""Harness and provider profiles: shape an agent for one provider or one model.

Deep Agents tutorial, section on profiles (harness and provider profiles): a
`ProviderProfile` says how a model is built from its `"provider:model"` string, and a
`HarnessProfile` says how the agent around it is shaped (prompt suffix, tool
descriptions, hidden tools). Both are registered under `"provider"` (every model of the
provider) or `"provider:model"` (one model); the model-level profile is merged on the
provider-level one.

Ported to fathom: only the import changes (`deepagents` → `fathom`). The model is
`"openai:scripted"`, served by a local `ScriptedOpenAIServer`; the provider profile
supplies its `base_url` and `api_key`, so no environment variable is needed.

Run: `.venv/bin/python examples/profiles.py`
"""

from __future__ import annotations

from typing import Any

from fathom import (
    HarnessProfile,
    ProviderProfile,
    create_deep_agent,
    register_harness_profile,
    register_provider_profile,
)
from fathom.testing import ScriptedModel, ScriptedOpenAIServer, ScriptRequest


def describe_request(request: ScriptRequest) -> str:
    """Say what the model was given: the end of its prompt and the `ls` description."""
    prompt = request.system_prompt or ""
    tools = {t["function"]["name"]: t["function"]["description"] for t in request.tools}
    return (
        f"Prompt starts with: {prompt.splitlines()[0]!r}\n"
        f"Suffix present: {'Answer in one sentence.' in prompt}\n"
        f"ls is described as: {tools['ls']!r}\n"
        f"grep offered: {'grep' in tools}"
    )


def main() -> dict[str, Any]:
    """Register the profiles, run the agent once and return its state."""
    scripted = ScriptedModel(policy=describe_request)
    with ScriptedOpenAIServer(scripted) as server:
        register_provider_profile(
            "openai", ProviderProfile(init_kwargs={"base_url": server.base_url,
                                                   "api_key": "scripted"})
        )
        register_harness_profile("openai", HarnessProfile(excluded_tools=frozenset({"grep"})))
        register_harness_profile(
            "openai:scripted",
            HarnessProfile(
                system_prompt_suffix="Answer in one sentence.",
                tool_description_overrides={"ls": "List a directory of the workspace."},
            ),
        )
        agent = create_deep_agent(model="openai:scripted", system_prompt="You are a helper.")
        result = agent.invoke({"messages": [{"role": "user", "content": "What do you see?"}]})
    print(result["messages"][-1].content)
    return result


if __name__ == "__main__":
    main()
