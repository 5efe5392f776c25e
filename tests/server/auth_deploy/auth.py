"""The test deployment's `langgraph_sdk.Auth`: two users by bearer token, owners on records.

`test_auth.py` copies the shared deploy folder, adds this file, and points
`langgraph.json`'s `auth.path` at `./auth.py:auth`; `fathom serve` and `langgraph dev` load it
unchanged.

- `Authorization: Bearer alice-token` is alice (permissions `threads:delete`), `bob-token` is
  bob (no permissions); anything else is 401.
- Threads and assistants get `metadata.owner` on create and are filtered by owner on every
  other action (the documented owner pattern); deleting a thread needs `threads:delete`
  (the handler returns False otherwise: 403).
- A run whose metadata has `"refuse": true` is refused (`threads.create_run` returns False:
  403), so a test can refuse one item of a batch.
- Crons get `metadata.owner` on create and are filtered by owner on every other action.
- Store namespaces must start with the caller's identity (an `assert`: 403 otherwise).
"""

from typing import Any

from langgraph_sdk import Auth

auth = Auth()

USERS: dict[str, dict[str, Any]] = {
    "alice-token": {
        "identity": "alice",
        "display_name": "Alice",
        "permissions": ["threads:delete"],
    },
    "bob-token": {"identity": "bob", "permissions": []},
}


@auth.authenticate
async def authenticate(authorization: str | None, path: str, method: str) -> dict[str, Any]:
    if not authorization:
        raise Auth.exceptions.HTTPException(status_code=401, detail="send a bearer token")
    scheme, _, token = authorization.partition(" ")
    user = USERS.get(token.strip())
    if scheme.lower() != "bearer" or user is None:
        raise Auth.exceptions.HTTPException(status_code=401, detail="unknown token")
    return user


@auth.on.threads.delete
async def only_deleters(ctx: Auth.types.AuthContext, value: Any) -> Any:
    if "threads:delete" not in ctx.permissions:
        return False
    return {"owner": ctx.user.identity}


@auth.on.threads.create_run
async def refusable_runs(ctx: Auth.types.AuthContext, value: Any) -> Any:
    metadata = value.setdefault("metadata", {})
    if metadata.get("refuse"):
        return False
    metadata["owner"] = ctx.user.identity
    return {"owner": ctx.user.identity}


@auth.on.threads
async def own_threads(ctx: Auth.types.AuthContext, value: Any) -> Any:
    metadata = value.setdefault("metadata", {})
    metadata["owner"] = ctx.user.identity
    return {"owner": ctx.user.identity}


@auth.on.assistants
async def own_assistants(ctx: Auth.types.AuthContext, value: Any) -> Any:
    metadata = value.setdefault("metadata", {})
    metadata["owner"] = ctx.user.identity
    return {"owner": ctx.user.identity}


@auth.on.crons
async def own_crons(ctx: Auth.types.AuthContext, value: Any) -> Any:
    metadata = value.setdefault("metadata", {})
    metadata["owner"] = ctx.user.identity
    return {"owner": ctx.user.identity}


@auth.on.store
async def own_namespace(ctx: Auth.types.AuthContext, value: Any) -> None:
    namespace = tuple(value.get("namespace") or ())
    assert namespace and namespace[0] == ctx.user.identity, "namespaces start with your identity"
