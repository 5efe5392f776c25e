"""Tracing tests: an in-memory span exporter, and tracing turned off again after each test."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import fathom.tracing


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on, every finished span kept in memory; off again afterwards."""
    exporter = InMemorySpanExporter()
    fathom.tracing.enable(span_processor=SimpleSpanProcessor(exporter))
    try:
        yield exporter
    finally:
        fathom.tracing.disable()


def tree(spans: tuple[ReadableSpan, ...] | list[ReadableSpan]) -> list[Any]:
    """The spans as nested `(name, kind, [children])`, children in start order."""
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        parent = span.parent.span_id if span.parent is not None else None
        children.setdefault(parent, []).append(span)

    def node(span: ReadableSpan) -> Any:
        kind = (span.attributes or {}).get("openinference.span.kind")
        assert span.context is not None
        return (span.name, kind, [node(c) for c in children.get(span.context.span_id, [])])

    return [node(root) for root in children.get(None, [])]
