"""The OpenTelemetry tracer provider fathom's spans go through."""

from __future__ import annotations

import os

from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter

__all__ = ["build_provider"]

DEFAULT_SERVICE_NAME = "fathom"


def build_provider(
    *,
    exporter: SpanExporter | None,
    span_processor: SpanProcessor | None,
    endpoint: str | None,
    tracer_provider: TracerProvider | None,
    service_name: str | None,
) -> TracerProvider:
    """A tracer provider whose spans reach the processor, exporter or endpoint given.

    Without any of the three, a given `tracer_provider` is used as it is; otherwise spans go
    to an OTLP/HTTP exporter configured by the `OTEL_EXPORTER_OTLP_*` variables.
    """
    if tracer_provider is not None and not (span_processor or exporter or endpoint):
        return tracer_provider
    if span_processor is None:
        if exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter(endpoint=endpoint) if endpoint else OTLPSpanExporter()
        span_processor = BatchSpanProcessor(exporter)
    if tracer_provider is None:
        name = service_name or os.environ.get("OTEL_SERVICE_NAME") or DEFAULT_SERVICE_NAME
        tracer_provider = TracerProvider(resource=Resource.create({SERVICE_NAME: name}))
    tracer_provider.add_span_processor(span_processor)
    return tracer_provider
