"""The names code outside `fathom.tracing` uses to ask for spans and attributes.

A leaf module (no imports), so that any layer can use the names without importing
OpenTelemetry or the rest of `fathom.tracing`.
"""

from __future__ import annotations

__all__ = ["SPAN_ATTRIBUTES_EVENT", "SPAN_METADATA_KEY"]

SPAN_METADATA_KEY = "fathom_span"
"""Run metadata that asks for a `CHAIN` span: a chain run whose name equals this key's value
gets a span of its own (the key is inherited by the runs inside it, which do not match)."""

SPAN_ATTRIBUTES_EVENT = "fathom.span_attributes"
"""A LangChain custom event (`dispatch_custom_event`) whose data, a flat mapping, is set as
attributes on the span of the nearest traced run it was dispatched in."""
