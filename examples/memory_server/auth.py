"""Who is calling: two users of the organisation `acme` and the application, by bearer token.

`langgraph.json` names this `Auth` (`"auth": {"path": "./auth.py:auth"}`); `fathom serve` and
`langgraph dev` load it unchanged. The tokens are fixed so that the example runs offline: a
real deployment checks a signed token (a JWT, a session) here instead.

- `Bearer alice-token` is alice, `Bearer bob-token` is bob, both of `org_id` `acme`;
  `Bearer acme-admin-token` is the application itself (`load_policies.py`), which may write
  the organisation's policies. Anything else is 401.
- A thread gets `metadata.owner` and `metadata.user_id` (the caller's identity) on create,
  whatever the client sent, and every other thread action is filtered by owner: a user sees
  only their threads. `user_id` is the key the consolidation agent lists a user's
  conversations by (`create_consolidation_agent`, `ServerThreads(user_key="user_id")`).
- Crons get `metadata.owner` on create and are filtered by owner; a cron's ticks run as the
  user who created it, so alice's consolidation cron consolidates alice's memory.
- The store: a user reads and writes only namespaces that start with their identity (their
  memory, `("alice",)`), and may read their organisation's `(org_id,)`; only the application
  writes there (403 otherwise). The graphs reach the store directly, not through these rules;
  the agent's `/policies/` route is read-only by itself (`organisation_policies`).
"""

from typing import Any

from langgraph_sdk import Auth

auth = Auth()

USERS: dict[str, dict[str, Any]] = {
    "alice-token": {"identity": "alice", "display_name": "Alice", "org_id": "acme"},
    "bob-token": {"identity": "bob", "display_name": "Bob", "org_id": "acme"},
    "acme-admin-token": {
        "identity": "acme-admin", "org_id": "acme", "permissions": ["policies:write"],
    },
}  # fmt: skip
"""Bearer token -> the user it names (what `@auth.authenticate` returns)."""

POLICY_WRITERS = "policies:write"
"""The permission to change an organisation's namespace in the store."""

READS = frozenset({"get", "search", "list_namespaces"})
"""Store actions that only read."""


@auth.authenticate
async def authenticate(authorization: str | None) -> dict[str, Any]:
    """The user named by the `Authorization: Bearer ...` header, or 401."""
    scheme, _, token = (authorization or "").partition(" ")
    user = USERS.get(token.strip())
    if scheme.lower() != "bearer" or user is None:
        raise Auth.exceptions.HTTPException(status_code=401, detail="send a known bearer token")
    return user


@auth.on.threads.create
async def tag_new_threads(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str]:
    """A new thread belongs to its creator: `owner` and `user_id` are the caller's identity."""
    metadata = value.setdefault("metadata", {})
    metadata["owner"] = ctx.user.identity
    metadata["user_id"] = ctx.user.identity
    return {"owner": ctx.user.identity}


@auth.on.threads
async def own_threads(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str]:
    """Every other thread action (read, search, runs, ...) sees the caller's threads only."""
    return {"owner": ctx.user.identity}


@auth.on.crons.create
async def tag_new_crons(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str]:
    """A new cron belongs to its creator (its ticks run as them)."""
    value.setdefault("metadata", {})["owner"] = ctx.user.identity
    return {"owner": ctx.user.identity}


@auth.on.crons
async def own_crons(ctx: Auth.types.AuthContext, value: Any) -> dict[str, str]:
    """Every other cron action sees the caller's crons only."""
    return {"owner": ctx.user.identity}


@auth.on.store
async def own_namespaces(ctx: Auth.types.AuthContext, value: Any) -> None:
    """Your own namespaces; your organisation's to read (to write, with `policies:write`)."""
    namespace = tuple(value.get("namespace") or ())
    identity = ctx.user.identity
    if namespace[:1] == (identity,):
        return
    org_id = ctx.user["org_id"]
    if namespace[:1] == (org_id,) and (ctx.action in READS or POLICY_WRITERS in ctx.permissions):
        return
    raise Auth.exceptions.HTTPException(
        status_code=403, detail=f"the store namespace {list(namespace)} is not yours"
    )
