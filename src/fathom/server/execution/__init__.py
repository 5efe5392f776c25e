"""Run execution: the worker pool, per-thread queues, multitask strategies, cancellation.

Layer: server; it must not import protocols or cli.
"""

from fathom.server.execution.manager import RunManager

__all__ = ["RunManager"]
