"""Structured output: `response_format=WeatherReport` fills `structured_response`.

Deep Agents tutorial, section 3.8 (结构化输出 / structured output, after the memory
examples): pass a pydantic model as `response_format`; the model's structured answer is
captured, validated and returned under the `structured_response` key of the state.

Ported to fathom: only the import changes (`deepagents` → `fathom`). Offline stand-ins:
`internet_search` searches a small in-file corpus of weather pages and returns a
Tavily-shaped dict, and the hosted model becomes a `ScriptedModel` that searches for the
weather, reads the figures off the search result and answers with a `WeatherReport`.

Run: `.venv/bin/python examples/structured_output.py`
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from langchain_core.messages import AIMessage
from pydantic import BaseModel, Field

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

# --------------------------------------------------------------------------- offline search

CORPUS: list[dict[str, str]] = [
    {
        "title": "San Francisco, California weather: current conditions",
        "url": "https://weather.example.com/us/ca/san-francisco",
        "topic": "general",
        "content": (
            "San Francisco, California. Now: Sunny, 18.3°C (65°F). Humidity 48%. "
            "Wind 7.6 km/h W. Next 24 hours: Pleasant sunny conditions expected to continue "
            "with temperatures around 64°F (18°C) during the day, dropping to around 52°F "
            "(11°C) at night. Clear skies with minimal precipitation expected."
        ),
    },
    {
        "title": "Seattle, Washington weather: current conditions",
        "url": "https://weather.example.com/us/wa/seattle",
        "topic": "general",
        "content": (
            "Seattle, Washington. Now: Rainy, 11.0°C (52°F). Humidity 87%. Wind 14.2 km/h S. "
            "Next 24 hours: Showers through the evening, clearing by morning."
        ),
    },
    {
        "title": "Bay Area heat advisory lifted",
        "url": "https://news.example.com/bay-area-heat-advisory",
        "topic": "news",
        "content": "The heat advisory for the San Francisco Bay Area was lifted on Monday.",
    },
]


class OfflineTavilyClient:
    """Answers `search` from `CORPUS`, in the shape of Tavily's response."""

    def search(
        self,
        query: str,
        *,
        max_results: int = 5,
        include_raw_content: bool = False,
        topic: str = "general",
    ) -> dict[str, Any]:
        words = set(re.findall(r"[a-z]+", query.lower())) - {"what", "s", "the", "like", "in"}
        results = [
            {"title": doc["title"], "url": doc["url"], "content": doc["content"]}
            | ({"raw_content": doc["content"]} if include_raw_content else {})
            for doc in CORPUS
            if doc["topic"] == topic and words & set(re.findall(r"[a-z]+", doc["title"].lower()))
        ]
        return {"query": query, "results": results[:max_results]}


tavily_client = OfflineTavilyClient()  # was: TavilyClient(api_key=os.environ["TAVILY_API_KEY"])


# --------------------------------------------------------------------------- the tutorial


def internet_search(
    query: str,
    max_results: int = 5,
    topic: Literal["general", "news", "finance"] = "general",
    include_raw_content: bool = False,
):
    """Run a web search"""
    return tavily_client.search(
        query,
        max_results=max_results,
        include_raw_content=include_raw_content,
        topic=topic,
    )


class WeatherReport(BaseModel):
    """A structured weather report with current conditions and forecast."""

    location: str = Field(description="The location for this weather report")
    temperature: float = Field(description="Current temperature in Celsius")
    condition: str = Field(description="Current weather condition (e.g., sunny, cloudy, rainy)")
    humidity: int = Field(description="Humidity percentage")
    wind_speed: float = Field(description="Wind speed in km/h")
    forecast: str = Field(description="Brief forecast for the next 24 hours")


# --------------------------------------------------------------------------- scripted model

_CONDITIONS = re.compile(
    r"^(?P<location>[^.]+)\. Now: (?P<condition>\w+), (?P<temperature>[\d.]+)°C.*?"
    r"Humidity (?P<humidity>\d+)%\. Wind (?P<wind>[\d.]+) km/h.*?"
    r"Next 24 hours: (?P<forecast>.*)$"
)


def weather_policy(request: ScriptRequest) -> AIMessage:
    """Search first; then answer with a `WeatherReport` built from the top result."""
    if not request.tool_results:
        return ai("", tool_call("internet_search", {"query": request.last_human_text}))
    top = json.loads(str(request.tool_results[-1].text))["results"][0]["content"]
    found = _CONDITIONS.match(top)
    if found is None or not request.has_tool("WeatherReport"):
        return ai(f"I found: {top}")
    report = {
        "location": found["location"],
        "temperature": float(found["temperature"]),
        "condition": found["condition"],
        "humidity": int(found["humidity"]),
        "wind_speed": float(found["wind"]),
        "forecast": found["forecast"],
    }
    return ai("", tool_call("WeatherReport", report))


def main() -> dict[str, Any]:
    """Ask for the weather in San Francisco; return the final state."""
    agent = create_deep_agent(
        model=ScriptedModel(policy=weather_policy),  # was: "google_genai:gemini-3.1-pro-preview"
        response_format=WeatherReport,
        tools=[internet_search],
    )

    result = agent.invoke(
        {"messages": [{"role": "user", "content": "What's the weather like in San Francisco?"}]}
    )

    print(result["structured_response"])
    return result


if __name__ == "__main__":
    main()
