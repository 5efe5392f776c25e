"""Run execution: the worker pool, per-thread queues, multitask strategies, cancellation."""

from fathom.server.execution.manager import RunManager

__all__ = ["RunManager"]
