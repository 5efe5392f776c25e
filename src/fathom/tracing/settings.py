"""Whether tracing is on, and the one place that turns it on: no `opentelemetry` import here.

`create_deep_agent` asks `active_handler()` for the callback handler to add; it is `None`
unless `enable()` was called or the standard OTLP environment variables name a collector.
Only then are the OpenTelemetry modules imported, so tracing costs nothing when off.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

    from fathom.tracing.handler import TracingHandler

__all__ = ["active_handler", "disable", "enable", "is_enabled", "run_span", "trace_metadata"]

logger = logging.getLogger(__name__)

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
"""Either one turns tracing on at the first agent built (the OTLP exporter reads them)."""

TRACES_PATH = "/v1/traces"
"""Where an OTLP/HTTP collector takes spans, below its base URL."""

_lock = threading.Lock()
_handler: TracingHandler | None = None
_environment_checked = False


def sdk_disabled() -> bool:
    """Whether `OTEL_SDK_DISABLED` asks OpenTelemetry to stay off (`true`, any case)."""
    return os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"


def _traces_url(endpoint: str) -> str:
    """`endpoint` as an OTLP/HTTP traces URL: a base URL gets `/v1/traces` appended."""
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith(TRACES_PATH) else endpoint + TRACES_PATH


def enable(
    exporter: SpanExporter | None = None,
    *,
    span_processor: SpanProcessor | None = None,
    endpoint: str | None = None,
    tracer_provider: TracerProvider | None = None,
    service_name: str | None = None,
    prices: Mapping[str, tuple[float, float]] | None = None,
    capture_messages: bool = False,
    max_value_chars: int = 4096,
) -> TracingHandler | None:
    """Turn tracing on for every agent built from now on; returns the callback handler.

    Spans go, in order of precedence, to `span_processor`; to `exporter` through a
    `BatchSpanProcessor`; or to an OTLP/HTTP exporter for `endpoint` (a collector's base
    URL, such as `http://localhost:6006` for Phoenix, or its full `/v1/traces` URL) or,
    with no endpoint, for the one the `OTEL_EXPORTER_OTLP_*` variables name. A given
    `tracer_provider` is used as it is (its own processors) when no processor, exporter or
    endpoint is given. `OTEL_SDK_DISABLED=true` wins over everything: nothing is enabled and
    `None` comes back.

    Args:
        exporter: A span exporter (such as the SDK's `InMemorySpanExporter`).
        span_processor: A span processor, used as given.
        endpoint: An OTLP/HTTP collector URL.
        tracer_provider: An SDK tracer provider to add the processor to, or to use as is.
        service_name: The `service.name` resource attribute; default `OTEL_SERVICE_NAME`,
            else `fathom`.
        prices: Model name -> (US dollars per million input tokens, per million output
            tokens): model spans then carry `llm.cost.*`.
        capture_messages: Also record every request's whole message list
            (`llm.input_messages.*`), the answer as `llm.output_messages.0.*` (with its
            tool calls) and the invocation parameters. This costs time that grows with the
            history; by default a model span records the request's newest message
            (`input.value`) and the answer's text or tool calls (`output.value`) only.
        max_value_chars: Longer `input.value` / `output.value` texts are cut to this.

    Raises:
        ModuleNotFoundError: the `otel` extra is not installed.
    """
    global _handler, _environment_checked
    if sdk_disabled():
        logger.info("OTEL_SDK_DISABLED is set: fathom tracing stays off")
        return None
    from fathom.tracing.handler import TracingHandler
    from fathom.tracing.provider import build_provider

    provider = build_provider(
        exporter=exporter,
        span_processor=span_processor,
        endpoint=_traces_url(endpoint) if endpoint else None,
        tracer_provider=tracer_provider,
        service_name=service_name,
    )
    handler = TracingHandler(
        provider.get_tracer("fathom"),
        provider=provider,
        prices=prices,
        capture_messages=capture_messages,
        max_value_chars=max_value_chars,
    )
    with _lock:
        previous, _handler, _environment_checked = _handler, handler, True
    if previous is not None:
        previous.shutdown()
    return handler


def disable() -> None:
    """Turn tracing off for agents built from now on, flushing the spans still queued.

    Agents built while it was on keep their handler; the environment is not read again.
    """
    global _handler, _environment_checked
    with _lock:
        previous, _handler, _environment_checked = _handler, None, True
    if previous is not None:
        previous.shutdown()


def _from_environment() -> None:
    """Enable tracing once if the OTLP endpoint variables are set (and the SDK not disabled)."""
    global _environment_checked
    with _lock:
        if _environment_checked:
            return
        _environment_checked = True
    if sdk_disabled() or not any(os.environ.get(name) for name in ENDPOINT_VARIABLES):
        return
    try:
        enable()
    except ModuleNotFoundError as error:
        logger.warning(
            "%s is set but tracing needs `pip install 'fathom[otel]'` (%s); tracing stays off",
            " or ".join(ENDPOINT_VARIABLES), error,
        )


def active_handler() -> TracingHandler | None:
    """The tracing callback handler agents get now, or `None` when tracing is off."""
    if not _environment_checked:
        _from_environment()
    return _handler


def is_enabled() -> bool:
    """Whether agents built now are traced."""
    return active_handler() is not None


def trace_metadata(
    config: Mapping[str, Any] | None, tool_call_id: str | None = None
) -> dict[str, str]:
    """W3C trace context (`traceparent`) of tool call `tool_call_id` (or else of the run
    `config` belongs to), for a run's metadata.

    An async subagent's run started with it on a `fathom serve` server becomes a child of
    the tool call that started it. Empty when tracing is off or the run is not traced.
    """
    handler = _handler
    if handler is None or config is None:
        return {}
    return handler.carrier(config, tool_call_id)


def run_span(
    run: Mapping[str, Any], graph_id: str
) -> contextlib.AbstractContextManager[None]:
    """A span around one `fathom serve` run, current while it runs; nothing when off."""
    handler = active_handler()
    if handler is None:
        return contextlib.nullcontext()
    return _run_span(handler, run, graph_id)


@contextlib.contextmanager
def _run_span(handler: TracingHandler, run: Mapping[str, Any], graph_id: str) -> Iterator[None]:
    from fathom.tracing.server import server_run_span

    with server_run_span(handler, run, graph_id):
        yield
