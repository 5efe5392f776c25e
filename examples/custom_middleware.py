"""Custom middleware: log every tool call with `@wrap_tool_call`.

Deep Agents tutorial, section 3.4 (中间件 / Middleware), "custom middleware": a
`log_tool_calls` function decorated with `@wrap_tool_call` wraps every tool call of an
agent that has a `get_weather` tool, counts the calls and prints them.

Ported to fathom: only the import changes (`deepagents` → `fathom`); the hosted model
becomes a `ScriptedModel` that asks for the weather in two cities, one `get_weather`
call after the other, and then answers from the tool results.

One change in `log_tool_calls`: the tutorial reads `request.name` / `request.args` behind
`hasattr` checks, but LangChain's `ToolCallRequest` has neither attribute (the call is in
`request.tool_call`), so the original would print `str(request)`, the whole request with
the agent state, and "N/A". The fallbacks here read `request.tool_call` instead.

Run: `.venv/bin/python examples/custom_middleware.py`
"""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware import wrap_tool_call
from langchain.tools import tool
from langchain_core.messages import AIMessage, ToolMessage

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call


@tool
def get_weather(city: str) -> str:
    """Get the weather in a city."""
    return f"The weather in {city} is sunny."


call_count = [0]  # Use list to allow modification in nested function


@wrap_tool_call
def log_tool_calls(request, handler):
    """Intercept and log every tool call - demonstrates cross-cutting concern."""
    call_count[0] += 1
    # The tutorial falls back to str(request) and 'N/A'; ToolCallRequest keeps the call
    # in request.tool_call.
    tool_name = request.name if hasattr(request, "name") else request.tool_call["name"]

    print(f"[Middleware] Tool call #{call_count[0]}: {tool_name}")
    print(
        f"[Middleware] Arguments: {request.args if hasattr(request, 'args') else request.tool_call['args']}"  # noqa: E501
    )

    # Execute the tool call
    result = handler(request)

    # Log the result
    print(f"[Middleware] Tool call #{call_count[0]} completed")

    return result


CITIES = ("Paris", "Tokyo")


def weather_policy(request: ScriptRequest) -> AIMessage:
    """Ask for each city's weather in turn, then answer from the results."""
    reports = [str(m.text) for m in request.messages if isinstance(m, ToolMessage)]
    if len(reports) < len(CITIES):
        return ai("", tool_call("get_weather", {"city": CITIES[len(reports)]}))
    return ai(" ".join(reports))


def main() -> dict[str, Any]:
    """Run the agent once; return the final state and how many tool calls were logged."""
    call_count[0] = 0
    agent = create_deep_agent(
        model=ScriptedModel(policy=weather_policy),  # was: "google_genai:gemini-3.1-pro-preview"
        tools=[get_weather],
        middleware=[log_tool_calls],
    )
    result = agent.invoke(
        {"messages": [{"role": "user", "content": "What's the weather in Paris and Tokyo?"}]}
    )
    print(result["messages"][-1].content)
    return {"state": result, "call_count": call_count[0]}


if __name__ == "__main__":
    main()
