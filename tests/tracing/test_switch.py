"""Turning tracing on and off: zero cost when off, the `OTEL_*` variables, the OTLP exporter.

Each process-level check runs a fresh interpreter, because "the tracing modules were never
imported" can only be seen there; spans travel over real HTTP to an OTLP receiver that
decodes the protobuf the real exporter sends.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.tracing.otlp_receiver import OtlpReceiver

import fathom.tracing
from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ai, tool_call

REPO = Path(__file__).resolve().parents[2]

RUN_AN_AGENT = """
import json, sys
TRACING_MODULES = ("fathom.tracing.handler", "fathom.tracing.provider", "openinference",
                   "opentelemetry.exporter", "opentelemetry.sdk.trace.export")
from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ai, tool_call
model = ScriptedModel(replies=[ai("", tool_call("write_todos", {"todos": []})), "done"])
agent = create_deep_agent(model, name="main")
agent.invoke({"messages": [("user", "go")]}, {"configurable": {"thread_id": "env-thread"}})
import fathom.tracing
fathom.tracing.disable()  # flushes what is queued
print(json.dumps({
    "callbacks": len((agent.config or {}).get("callbacks") or []),
    "tracing_imported": sorted(m for m in sys.modules if m.startswith(TRACING_MODULES)),
}))
"""


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    received = OtlpReceiver()
    try:
        yield received
    finally:
        received.close()


def _run(env: dict[str, str]) -> dict[str, object]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    proc = subprocess.run(
        [sys.executable, "-c", RUN_AN_AGENT], env={**clean, **env}, cwd=REPO,
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_with_tracing_off_no_handler_is_added_and_no_tracing_module_is_imported() -> None:
    # LangChain's own `langsmith.client` imports `opentelemetry.sdk.trace` when the SDK is
    # installed, so the check is on what tracing would add: fathom's span code, the
    # semantic conventions, span processors and exporters.
    assert _run({}) == {"callbacks": 0, "tracing_imported": []}


def test_otel_sdk_disabled_wins_over_an_endpoint(receiver: OtlpReceiver) -> None:
    result = _run({"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_SDK_DISABLED": "true"})
    assert result == {"callbacks": 0, "tracing_imported": []}
    assert receiver.requests == 0


@pytest.mark.parametrize("variable", ["OTEL_EXPORTER_OTLP_ENDPOINT",
                                      "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"])
def test_the_standard_otlp_variables_turn_tracing_on(receiver: OtlpReceiver, variable: str) -> None:
    url = receiver.endpoint + ("/v1/traces" if variable.endswith("TRACES_ENDPOINT") else "")
    result = _run({variable: url, "OTEL_SERVICE_NAME": "order-desk"})
    assert result["callbacks"] == 1
    spans = receiver.wait_for(4)  # agent, model, tool, model
    assert sorted(s.name for s in spans) == ["main", "scripted", "scripted", "write_todos"]
    assert {s.resource["service.name"] for s in spans} == {"order-desk"}
    assert {s.attributes["session.id"] for s in spans} == {"env-thread"}
    [root] = [s for s in spans if not s.parent_id]
    assert root.attributes["openinference.span.kind"] == "AGENT"
    assert {s.parent_id for s in spans if s.parent_id} == {root.span_id}


def test_enable_with_an_endpoint_exports_through_the_real_otlp_exporter(
    receiver: OtlpReceiver,
) -> None:
    fathom.tracing.enable(endpoint=receiver.endpoint, service_name="fathom-tests")
    try:
        model = ScriptedModel(replies=[ai("", tool_call("ls", {"path": "/"})), "empty"])
        agent = create_deep_agent(model, name="main")
        agent.invoke({"messages": [("user", "list")]}, {"configurable": {"thread_id": "t-9"}})
    finally:
        fathom.tracing.disable()
    spans = receiver.wait_for(4)
    by_name = {s.name: s for s in spans}
    assert by_name["ls"].attributes["tool.name"] == "ls"
    assert by_name["ls"].attributes["openinference.span.kind"] == "TOOL"
    llm = [s for s in spans if s.name == "scripted"]
    assert all(s.attributes["llm.token_count.total"] > 0 for s in llm)
    assert {s.resource["service.name"] for s in spans} == {"fathom-tests"}


def test_agents_built_after_disable_get_no_handler(receiver: OtlpReceiver) -> None:
    fathom.tracing.enable(endpoint=receiver.endpoint)
    traced = create_deep_agent(ScriptedModel(replies=["a"]), name="main")
    fathom.tracing.disable()
    untraced = create_deep_agent(ScriptedModel(replies=["b"]), name="main")
    assert len((traced.config or {}).get("callbacks") or []) == 1
    assert not (untraced.config or {}).get("callbacks")
    assert not fathom.tracing.is_enabled()
