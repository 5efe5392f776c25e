"""The span around one `fathom serve` run.

It is the current span while the graph runs, so the run's AGENT span (and everything under
it) hangs below it. A run whose metadata carries a W3C `traceparent` (an async subagent's
run, started by a traced supervisor's `start_async_task`) continues that trace.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from openinference.semconv.trace import SpanAttributes
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from fathom.tracing.attributes import CHAIN, FATHOM_RUN_ID, KIND
from fathom.tracing.handler import TracingHandler

__all__ = ["SERVER_RUN_SPAN", "server_run_span"]

SERVER_RUN_SPAN = "fathom serve run"


@contextlib.contextmanager
def server_run_span(
    handler: TracingHandler, run: Mapping[str, Any], graph_id: str
) -> Iterator[None]:
    """Run the body inside a CHAIN span for `run` (thread, run, assistant and graph ids)."""
    metadata = run.get("metadata") or {}
    carrier = {k: str(v) for k, v in metadata.items() if k in ("traceparent", "tracestate")}
    parent = TraceContextTextMapPropagator().extract(carrier) if carrier else None
    attributes = {
        KIND: CHAIN,
        SpanAttributes.SESSION_ID: str(run.get("thread_id") or ""),
        FATHOM_RUN_ID: str(run.get("run_id") or ""),
        "fathom.assistant_id": str(run.get("assistant_id") or ""),
        "fathom.graph_id": graph_id,
    }
    span = handler.tracer.start_span(SERVER_RUN_SPAN, context=parent, attributes=attributes)
    with trace.use_span(span, end_on_exit=True, record_exception=False,
                        set_status_on_exception=False):
        try:
            yield
        except BaseException as error:  # boundary: the run's span records it; re-raised
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
            raise
