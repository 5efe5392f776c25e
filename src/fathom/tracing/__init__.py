"""OpenTelemetry traces of fathom's runs, in OpenInference's semantic conventions.

Off by default, and then free: no callback handler is added and `opentelemetry` is not
imported. Turn it on with one call, before building agents:

```python
import fathom.tracing

fathom.tracing.enable(endpoint="http://localhost:6006")  # Phoenix, Langfuse, any OTLP/HTTP
```

or with the standard environment variables (`OTEL_EXPORTER_OTLP_ENDPOINT` or
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_SERVICE_NAME`; `OTEL_SDK_DISABLED=true` keeps it
off). Every agent that `create_deep_agent` builds then reports its runs, model calls, tool
calls, subagents (sync, async and those the code interpreter starts) and `fathom serve`
runs as spans. Needs `pip install 'fathom[otel]'`; see `docs/tracing.md`.

Layer: core, the lowest; it must not import any other layer of fathom.
"""

from fathom.tracing.keys import SPAN_ATTRIBUTES_EVENT, SPAN_METADATA_KEY
from fathom.tracing.settings import (
    active_handler,
    disable,
    enable,
    is_enabled,
    run_span,
    trace_metadata,
)

__all__ = [
    "SPAN_ATTRIBUTES_EVENT",
    "SPAN_METADATA_KEY",
    "active_handler",
    "disable",
    "enable",
    "is_enabled",
    "run_span",
    "trace_metadata",
]
