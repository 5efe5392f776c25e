"""A model built with `init_chat_model(..., max_retries=10, timeout=120)`.

Deep Agents tutorial, section 3.1 (模型参数 / Model), "connection resilience": LangChain
chat models retry failed API requests (network errors, 429, 5xx) with exponential backoff,
6 times by default; long-running agents on unreliable networks should raise `max_retries`
(10–15) and the `timeout`.

Ported to fathom: only the import changes (`deepagents` → `fathom`). The hosted Gemini model
becomes the real OpenAI provider class (`init_chat_model("openai:scripted", ...)`) talking
over HTTP to a `ScriptedOpenAIServer` on 127.0.0.1, so the real provider code path runs,
retries included: the server's first two answers are HTTP 500 errors (a flaky network), the
client backs off and retries, and the third request succeeds.

Run: `.venv/bin/python examples/model_with_retries.py`
"""

from __future__ import annotations

from typing import Any

from langchain.chat_models import init_chat_model

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ScriptedOpenAIServer, ScriptRequest

FLAKY_CALLS = 2
"""How many requests fail with HTTP 500 before the server answers."""


class TransientServerError(RuntimeError):
    """Raised by the script; the server turns it into an HTTP 500 response."""


def flaky_policy(request: ScriptRequest) -> str:
    if request.index < FLAKY_CALLS:
        raise TransientServerError(f"simulated outage (request #{request.index + 1})")
    return f"Answered after {request.index} failed attempt(s): {request.last_human_text!r} → hello!"


def main() -> dict[str, Any]:
    """Invoke the agent once through the flaky server; return state and request counts."""
    scripted = ScriptedModel(policy=flaky_policy)
    with ScriptedOpenAIServer(scripted) as server:
        agent = create_deep_agent(
            model=init_chat_model(
                model="openai:scripted",  # was: "google_genai:gemini-3.1-pro-preview"
                base_url=server.base_url,  # offline: the local OpenAI-compatible server
                api_key="scripted",
                max_retries=10,  # Increase for unreliable networks (default: 6)
                timeout=120,  # Increase timeout for slow connections
            ),
        )
        result = agent.invoke({"messages": [{"role": "user", "content": "Say hello"}]})

    print(f"HTTP requests sent: {scripted.calls} ({FLAKY_CALLS} failed with HTTP 500)")
    print(result["messages"][-1].content)
    return {
        "state": result,
        "http_requests": scripted.calls,
        "answered_requests": len(scripted.requests),
    }


if __name__ == "__main__":
    main()
