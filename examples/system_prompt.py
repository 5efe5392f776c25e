"""A custom system prompt, and a model given as a `"provider:model"` string.

Deep Agents tutorial, section 3.3 (系统提示词 / System prompt): deep agents come with a
built-in system prompt about planning and the filesystem, and middleware that adds tools
appends their instructions to it automatically; every agent should still get its own
`system_prompt` for its use case.

Ported to fathom: only the import changes (`deepagents` → `fathom`). The tutorial passes
the model as a string, `model="google_genai:gemini-3.1-pro-preview"`; this port keeps a
string, `"openai:scripted"`, and points the OpenAI provider at a local
`ScriptedOpenAIServer` through the standard `OPENAI_BASE_URL` / `OPENAI_API_KEY`
environment variables (set only while the example runs), so the string is resolved by
`init_chat_model` exactly as a hosted model's would be.

Run: `.venv/bin/python examples/system_prompt.py`
"""

from __future__ import annotations

import os
from typing import Any
from unittest import mock

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ScriptedOpenAIServer, ScriptRequest

research_instructions = """\
You are an expert researcher. Your job is to conduct \
thorough research, and then write a polished report. \
"""


def prompt_policy(request: ScriptRequest) -> str:
    """Describe the instructions received: the first line and the section headings."""
    prompt = request.system_prompt or ""
    headings = [line for line in prompt.splitlines() if line.startswith("## ")]
    return (
        f"My instructions start with: {prompt.splitlines()[0]!r}\n"
        f"Sections added by middleware: {', '.join(h[3:] for h in headings)}"
    )


def main() -> dict[str, Any]:
    """Ask the agent about its instructions; return the state and the system prompt sent."""
    scripted = ScriptedModel(policy=prompt_policy)
    with (
        ScriptedOpenAIServer(scripted) as server,
        mock.patch.dict(
            os.environ, {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "scripted"}
        ),
    ):
        agent = create_deep_agent(
            model="openai:scripted",  # was: "google_genai:gemini-3.1-pro-preview"
            system_prompt=research_instructions,
        )
        result = agent.invoke(
            {"messages": [{"role": "user", "content": "What are your instructions?"}]}
        )

    print(result["messages"][-1].content)
    return {"state": result, "system_prompt": scripted.requests[0].system_prompt}


if __name__ == "__main__":
    main()
