"""`benchmarks/server.py`'s scripted graph, loaded unchanged by `fathom serve` and `langgraph dev`.

`agent` is a fathom deep agent (`create_deep_agent`, every default middleware) on a
`ScriptedModel` that answers `echo: <last user text>` without calling a tool, so each run is
one model call and the benchmark can check every reply. The model is free, so the figures
are the servers' own cost per run: HTTP, run bookkeeping, queueing, checkpointing, streaming.

No `from __future__ import annotations` here: a loader may execute this file without
registering it in `sys.modules`.
"""

from fathom import create_deep_agent
from fathom.testing import ScriptedModel, ScriptRequest


def _echo(request: ScriptRequest) -> str:
    return f"echo: {request.last_human_text}"


agent = create_deep_agent(
    model=ScriptedModel(policy=_echo),
    system_prompt="You are the scripted benchmark agent.",
    name="agent",
)
