"""Filesystem permissions: ordered allow/deny rules for the built-in file tools.

Rules are checked in the order given and the first rule that matches an operation decides;
when none matches, the operation is allowed. `"read"` covers `ls`, `read_file`, `glob` and
`grep`; `"write"` covers `write_file`, `edit_file` and `delete`. Deleting a directory
removes everything under it, so it is refused when any deny-write rule could match a path
inside it, even if an earlier rule allows the directory itself. Paths are glob patterns
over absolute paths with `*`, `?`, `**`, `[abc]` and `{a,b}`; a pattern ending in `/`
covers everything under that directory. Rules are enforced by a policy hook in front of
the backend, so a refused operation never reaches storage, and `ls` / `glob` / `grep`
leave out what may not be read.

Permissions govern the file tools only: a backend that can `execute` shell commands can
reach any path, so rules cannot be promised there (see `check_permissions_apply`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from fathom.backends._globbing import GlobError, compile_glob
from fathom.backends.errors import BackendError, ErrorKind
from fathom.backends.policy import BackendPolicy, FileOperation
from fathom.backends.protocol import supports_execute

__all__ = [
    "FilesystemPermission",
    "PermissionPolicy",
    "check_permissions_apply",
    "first_matching_rule",
]

Operation = Literal["read", "write"]
_GLOB_CHARS = re.compile(r"[*?\[{]")


@dataclass(frozen=True)
class FilesystemPermission:
    """One rule: `mode` for `operations` on paths matching any of `paths`.

    Args:
        operations: `"read"` and/or `"write"`.
        paths: Absolute glob patterns, e.g. `"/workspace/**"`, `"/**/.env"`,
            `"/{docs,notes}/**"`.
        mode: `"allow"` (the default), `"deny"`, or `"interrupt"`: the operation pauses
            the run for a person to approve or reject (needs a checkpointer); listings
            still show such paths.

    Raises:
        ValueError: an unknown operation or mode, a relative pattern, or one with a `..`
            segment (write the absolute path it means).
    """

    operations: Sequence[Operation]
    paths: Sequence[str]
    mode: Literal["allow", "deny", "interrupt"] = "allow"

    def __post_init__(self) -> None:
        if isinstance(self.operations, str) or isinstance(self.paths, str):
            raise TypeError("operations and paths are lists, e.g. operations=['write'].")
        if not self.operations or set(self.operations) - {"read", "write"}:
            raise ValueError(
                f"operations must be a non-empty list of 'read' / 'write', not {self.operations!r}"
            )
        if self.mode not in ("allow", "deny", "interrupt"):
            raise ValueError(
                f"mode must be 'allow', 'deny' or 'interrupt', not {self.mode!r}"
            )
        if not self.paths:
            raise ValueError("paths must list at least one glob pattern, e.g. ['/workspace/**'].")
        for pattern in self.paths:
            if not isinstance(pattern, str) or not pattern.startswith("/"):
                raise ValueError(f"Permission paths are absolute patterns; got {pattern!r}.")
            if ".." in pattern.split("/"):
                raise ValueError(
                    f"Permission path {pattern!r} has a '..' segment; write the absolute "
                    "path it stands for (paths are matched after normalization)."
                )
            try:
                compile_glob(_full_pattern(pattern))
            except GlobError as error:
                raise ValueError(str(error)) from None

    def matches(self, operation: Operation, candidates: Iterable[str]) -> bool:
        """Whether this rule covers `operation` on any of the `candidates` path forms."""
        if operation not in self.operations:
            return False
        regexes = [compile_glob(_full_pattern(p)) for p in self.paths]
        return any(r.match(c) for r in regexes for c in candidates)

    def describe(self) -> str:
        """`deny write /policies/**` — how the rule is named in an error message."""
        return f"{self.mode} {'/'.join(self.operations)} {', '.join(self.paths)}"


def _full_pattern(pattern: str) -> str:
    return pattern + "**" if pattern.endswith("/") else pattern


def _candidates(path: str, directory: bool) -> list[str]:
    """The forms of a path a rule may name: a directory is matched with and without `/`."""
    if not directory:
        return [path]
    bare = path.rstrip("/") or "/"
    return [bare, bare if bare == "/" else bare + "/"]


def first_matching_rule(
    rules: Sequence[FilesystemPermission], operation: Operation, path: str, directory: bool
) -> tuple[int, FilesystemPermission] | None:
    """The first rule (1-based index, rule) that decides `operation` on `path`."""
    candidates = _candidates(path, directory)
    for index, rule in enumerate(rules, start=1):
        if rule.matches(operation, candidates):
            return index, rule
    return None


_VERB = {"read": "reading", "write": "changing"}


class PermissionPolicy(BackendPolicy):
    """The policy hook that enforces `FilesystemPermission` rules."""

    def __init__(self, rules: Sequence[FilesystemPermission]) -> None:
        self.rules = list(rules)

    def allows(self, operation: Operation, path: str, directory: bool = False) -> bool:
        """Whether `operation` on `path` is allowed (no matching rule: allowed)."""
        decided = first_matching_rule(self.rules, operation, path, directory)
        return decided is None or decided[1].mode != "deny"

    def check(self, operation: FileOperation) -> BackendError | None:
        """A `PERMISSION` error (its `message` names the rule) when a rule refuses."""
        path = operation.normalized_path
        if path is None:
            return None  # the backend answers with the path error itself
        for checked in dict.fromkeys([path, operation.resolved_path or path]):
            refusal = self._refusal(operation, checked, shown=path)
            if refusal:
                return BackendError(ErrorKind.PERMISSION, path, message=refusal)
        return None

    def _refusal(self, operation: FileOperation, path: str, shown: str) -> str | None:
        recursive = operation.name == "delete" and bool(operation.arguments.get("directory"))
        directory = operation.is_listing or recursive
        decided = first_matching_rule(self.rules, operation.kind, path, directory)
        if recursive and (decided is None or decided[1].mode == "allow"):
            decided = _deny_inside(self.rules, path)
        if decided is None or decided[1].mode == "allow":
            return None
        index, rule = decided
        if rule.mode == "interrupt":
            return _ask_approval(operation, shown, index, rule)
        via = f" (it leads to '{path}')" if path != shown else ""
        allowed = [r.describe() for r in self.rules if r.mode == "allow"]
        hint = (
            f" Allowed: {'; '.join(allowed)}." if allowed else ""
        ) + " Do not retry this path; work within what is allowed or ask the user."
        return (
            f"Error: permission denied: {_VERB[operation.kind]} '{shown}'{via} is not allowed "
            f"(rule {index}: {rule.describe()}).{hint}"
        )

    def can_see(self, path: str) -> bool:
        return self.allows("read", path, directory=path.endswith("/"))


def _ask_approval(
    operation: FileOperation, path: str, index: int, rule: FilesystemPermission
) -> str | None:
    """Pause the run for a person to decide on an `interrupt` rule's operation.

    The interrupt value has the shape of LangChain's human-in-the-loop requests
    (`action_requests`, `review_configs`); resume with `{"decisions": [{"type":
    "approve"}]}` to let it run, or `"reject"` (optionally with a `message`) to refuse it.
    """
    from langgraph.types import interrupt

    request = {
        "action_requests": [
            {
                "name": operation.name,
                "args": {"path": path, **_plain(operation.arguments)},
                "description": (
                    f"{_VERB[operation.kind].capitalize()} `{path}` needs approval "
                    f"(rule {index}: {rule.describe()})."
                ),
            }
        ],
        "review_configs": [
            {"action_name": operation.name, "allowed_decisions": ["approve", "reject"]}
        ],
    }
    answer = interrupt(request)
    decisions = answer.get("decisions") if isinstance(answer, dict) else None
    decision = decisions[0] if isinstance(decisions, list) and decisions else {}
    if isinstance(decision, dict) and decision.get("type") == "approve":
        return None
    reason = decision.get("message") if isinstance(decision, dict) else None
    return (
        f"Error: {_VERB[operation.kind]} `{path}` was not approved by the user"
        + (f": {reason}" if reason else "")
        + ". Do not retry it; continue without it or ask the user."
    )


def _plain(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The operation's arguments that fit in an approval request (short scalars)."""
    return {
        key: value
        for key, value in arguments.items()
        if isinstance(value, (bool, int, float)) or (isinstance(value, str) and len(value) < 200)
    }


def _deny_inside(
    rules: Sequence[FilesystemPermission], directory: str
) -> tuple[int, FilesystemPermission] | None:
    """The first deny-write rule that could match something under `directory`.

    Deleting a directory removes every file under it, so an earlier allow rule on the
    directory does not settle it: a later deny on one file inside must still refuse the
    delete. The test is cautious (it may refuse a delete that would touch no denied
    file, never the reverse): a pattern overlaps when its literal part lies inside
    `directory`, or lies above it and the rest of the pattern can reach more than one
    level down.
    """
    inside = directory.rstrip("/") + "/"
    for index, rule in enumerate(rules, start=1):
        if rule.mode != "deny" or "write" not in rule.operations:
            continue
        for pattern in rule.paths:
            full = _full_pattern(pattern)
            literal = _literal_prefix(full)
            if literal.startswith(inside):
                return index, rule
            if not inside.startswith(literal):
                continue
            if literal == full:  # no wildcard: a literal path above the directory
                continue
            anchor = literal[: literal.rfind("/") + 1]
            rest = full[len(anchor) :]
            if "/" in rest or "**" in rest:
                return index, rule
    return None


def _literal_prefix(pattern: str) -> str:
    match = _GLOB_CHARS.search(pattern)
    return pattern if match is None else pattern[: match.start()]


def check_permissions_apply(rules: Sequence[FilesystemPermission], backend: Any) -> None:
    """Refuse rules that a shell-capable backend would let the agent walk around.

    With a `CompositeBackend` whose default can `execute`, every rule must sit under a
    route prefix (served by a backend without a shell); a backend that can `execute`
    on its own cannot carry permissions at all.

    Raises:
        NotImplementedError: a rule covers paths served by a backend with `execute`.
    """
    if not rules:
        return
    from fathom.backends.composite import CompositeBackend

    if isinstance(backend, CompositeBackend):
        if not supports_execute(backend.default):
            return
        for rule in rules:
            for pattern in rule.paths:
                literal = _literal_prefix(_full_pattern(pattern))
                if not any(literal.startswith(prefix) for prefix in backend.routes):
                    raise NotImplementedError(
                        f"Permission path {pattern!r} falls to the default backend, which can "
                        "run shell commands, so the rule could not be enforced. Put every "
                        f"permission path under a route ({', '.join(backend.routes)})."
                    )
        return
    if supports_execute(backend):
        raise NotImplementedError(
            "Filesystem permissions cannot be enforced on a backend that can run shell "
            "commands (execute). Route the protected paths to a backend without a shell "
            "with CompositeBackend, or use interrupt_on for execute."
        )
