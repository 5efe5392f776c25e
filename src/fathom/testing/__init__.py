"""Offline test kit: a scripted LangChain chat model and an OpenAI-compatible server for it.

```python
from fathom.testing import ScriptedModel, ai, tool_call

model = ScriptedModel(
    replies=[ai("", tool_call("search", {"q": "fathom"}))],
    policy=lambda request: f"You said: {request.last_human_text}",
)
```

Layer: core, the lowest; it must not import any other layer of fathom.
"""

from fathom.testing.concurrency import Rendezvous, RendezvousTimeout
from fathom.testing.embeddings import hashed_embedding
from fathom.testing.openai_server import ScriptedOpenAIServer
from fathom.testing.scripted import (
    RecordedRequest,
    ScriptedModel,
    ScriptExhausted,
    ScriptRequest,
    ai,
    tool_call,
)
from fathom.testing.tokens import approx_tokens

__all__ = [
    "RecordedRequest",
    "Rendezvous",
    "RendezvousTimeout",
    "ScriptExhausted",
    "ScriptRequest",
    "ScriptedModel",
    "ScriptedOpenAIServer",
    "ai",
    "approx_tokens",
    "hashed_embedding",
    "tool_call",
]
