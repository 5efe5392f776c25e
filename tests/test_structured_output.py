"""response_format puts a validated object under structured_response."""

from __future__ import annotations

from pydantic import BaseModel, Field

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ai, tool_call

USER = {"messages": [{"role": "user", "content": "weather in SF?"}]}
REPORT = {
    "location": "San Francisco, California",
    "temperature": 18.3,
    "condition": "Sunny",
    "humidity": 48,
    "wind_speed": 7.6,
    "forecast": "Clear skies for the next 24 hours.",
}


class WeatherReport(BaseModel):
    """A structured weather report."""

    location: str = Field(description="The location for this weather report")
    temperature: float = Field(description="Current temperature in Celsius")
    condition: str = Field(description="Current weather condition")
    humidity: int = Field(description="Humidity percentage")
    wind_speed: float = Field(description="Wind speed in km/h")
    forecast: str = Field(description="Brief forecast for the next 24 hours")


def test_structured_response_is_a_validated_instance():
    model = ScriptedModel(replies=[ai("", tool_call("WeatherReport", REPORT))])
    result = create_deep_agent(model, response_format=WeatherReport).invoke(USER)
    report = result["structured_response"]
    assert isinstance(report, WeatherReport)
    assert report.temperature == 18.3 and report.humidity == 48
    assert "WeatherReport" in model.requests[0].tool_names


def test_invalid_structured_output_is_sent_back_for_a_retry():
    bad = {**REPORT, "humidity": "very"}
    model = ScriptedModel(
        replies=[
            ai("", tool_call("WeatherReport", bad)),
            ai("", tool_call("WeatherReport", REPORT)),
        ]
    )
    result = create_deep_agent(model, response_format=WeatherReport).invoke(USER)
    assert result["structured_response"].humidity == 48
    errors = [m for m in model.requests[1].messages if m.type == "tool"]
    assert errors and "humidity" in errors[-1].content


def test_tools_run_before_the_structured_answer():
    model = ScriptedModel(
        replies=[
            ai("", tool_call("write_file", {"file_path": "/raw.txt", "content": "18.3C"})),
            ai("", tool_call("WeatherReport", REPORT)),
        ]
    )
    result = create_deep_agent(model, response_format=WeatherReport).invoke(USER)
    assert result["files"]["/raw.txt"]["content"] == "18.3C"
    assert result["structured_response"].location.startswith("San Francisco")


def test_json_schema_dict_gives_a_dict():
    schema = {
        "title": "Answer",
        "type": "object",
        "properties": {"value": {"type": "integer"}},
        "required": ["value"],
    }
    model = ScriptedModel(replies=[ai("", tool_call("Answer", {"value": 7}))])
    result = create_deep_agent(model, response_format=schema).invoke(USER)
    assert result["structured_response"] == {"value": 7}
