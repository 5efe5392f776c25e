"""A real OTLP/HTTP trace receiver for tests: decodes `ExportTraceServiceRequest` protobufs.

It answers `POST /v1/traces` as a collector does (an empty `ExportTraceServiceResponse`),
and keeps every span it received with its resource's attributes.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


@dataclass
class ReceivedSpan:
    """One span as the collector got it."""

    name: str
    span_id: str
    parent_id: str
    trace_id: str
    attributes: dict[str, Any]
    resource: dict[str, Any]
    status_code: int


@dataclass
class OtlpReceiver:
    """An OTLP/HTTP receiver on a free local port (`endpoint` is its base URL)."""

    spans: list[ReceivedSpan] = field(default_factory=list)
    requests: int = 0

    def __post_init__(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.path != "/v1/traces":
                    self.send_response(404)
                    self.end_headers()
                    return
                request = ExportTraceServiceRequest.FromString(body)
                receiver.add(request)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def add(self, request: ExportTraceServiceRequest) -> None:
        with self._lock:
            self.requests += 1
            for resource_spans in request.resource_spans:
                resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
                for scope in resource_spans.scope_spans:
                    for span in scope.spans:
                        self.spans.append(ReceivedSpan(
                            name=span.name,
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex(),
                            trace_id=span.trace_id.hex(),
                            attributes={a.key: _value(a.value) for a in span.attributes},
                            resource=resource,
                            status_code=span.status.code,
                        ))

    def wait_for(self, count: int, deadline: float = 60.0) -> list[ReceivedSpan]:
        """The spans once at least `count` arrived (polled; the deadline only bounds a hang)."""
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            with self._lock:
                if len(self.spans) >= count:
                    return list(self.spans)
            time.sleep(0.05)
        raise AssertionError(f"expected {count} spans, got {len(self.spans)}")

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
