"""In-process Agent Protocol hosting: what middleware may use of a server.

`loopback` keeps a registry of the fathom apps alive in this process (the server registers
each app it creates) and the current run's app; `client` makes a `langgraph_sdk` client
that calls an app in process. Async subagents without a `url`, and a child's notification
to its parent, go through them, so the middleware never imports `fathom.server`.

Layer: foundation (beside backends); imports only Starlette, httpx and langgraph-sdk.
"""
