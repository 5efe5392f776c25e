"""Organisation memory: a read-only route onto an organisation's namespace in the store.

An organisation's standing policies (compliance rules, style guides, escalation paths) are
shared by every user and every conversation in it, and only the application changes them.
`organisation_policies` gives the route that serves them to an agent: a `StoreBackend` on
the organisation's namespace (`(org_id,)`), mounted at `/policies/` in a
`CompositeBackend`, behind a policy that refuses every change with an answer saying why.
The agent reads `/policies/compliance.md` with the ordinary file tools (and `memory=` can
load it into the prompt); its `write_file`, `edit_file` and `delete` there are refused and
nothing reaches the store. The application preloads and updates the policies through the
store API (`store.put((org_id,), "/compliance.md", {"content": ...})`, or
`client.store.put_item` against a server); a plain `{"content": text}` value is enough.

Layer: middleware (it joins a backend with a permission policy).
"""

from __future__ import annotations

from langgraph.store.base import BaseStore

from fathom.backends._paths import normalize_dir
from fathom.backends.composite import route_prefix
from fathom.backends.errors import BackendError, ErrorKind
from fathom.backends.policy import BackendPolicy, FileOperation, PolicyBackend
from fathom.backends.store import NamespaceFactory, StoreBackend

__all__ = ["POLICIES_ROUTE", "ReadOnlyPolicy", "organisation_policies"]

POLICIES_ROUTE = "/policies/"
"""Where `organisation_policies` mounts the organisation's files by default."""


class ReadOnlyPolicy(BackendPolicy):
    """Refuses every change (write, edit, delete, upload) to the backend it guards.

    Args:
        mount: Where the guarded backend is mounted (its paths are shown under it in the
            refusal, as the model named them).
        what: What the files are, for the refusal ("organisation policy").
    """

    def __init__(self, mount: str = "/", what: str = "read-only") -> None:
        self.mount = normalize_dir(mount)
        self.what = what

    def check(self, operation: FileOperation) -> BackendError | None:
        """A `PERMISSION` refusal for a change; reads pass."""
        if operation.kind != "write":
            return None
        inner = operation.normalized_path or operation.path
        shown = self.mount.rstrip("/") + inner if inner.startswith("/") else inner
        return BackendError(
            ErrorKind.PERMISSION,
            shown,
            message=(
                f"Error: permission denied: '{shown}' is {self.what}, read-only for you: it "
                "cannot be written, edited or deleted here, and nothing was changed. Follow "
                "it as it is; if it needs a change, tell the user so that the people who "
                "maintain it can update it."
            ),
        )


def organisation_policies(
    namespace: tuple[str, ...] | NamespaceFactory,
    *,
    route: str = POLICIES_ROUTE,
    store: BaseStore | None = None,
) -> dict[str, PolicyBackend]:
    """The `CompositeBackend` route that serves an organisation's policies read-only.

    Args:
        namespace: The organisation's store namespace, `(org_id,)`, or a factory
            `(rt) -> (org_id,)` that picks it per call (from `rt.context`, the server's
            authenticated user, ...), as `StoreBackend(namespace=...)` takes.
        route: Where the files appear to the agent (default `/policies/`); the store key
            of `/policies/compliance.md` is `/compliance.md`.
        store: The store (default: the agent's, `create_deep_agent(store=...)`).

    Returns:
        `{route: backend}`, to merge into a `CompositeBackend`'s routes.

    Raises:
        ValueError: `route` is not a usable directory path, or is `/`; a `namespace` tuple
            that is not a valid store namespace.
    """
    mount = route_prefix(route, "route must be a directory below `/`, such as '/policies/'")
    backend = StoreBackend(namespace=namespace, store=store)
    return {mount: PolicyBackend(backend, [ReadOnlyPolicy(mount, "organisation policy")])}
