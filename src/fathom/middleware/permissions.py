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

An `"interrupt"` rule pauses the run for a person before the tool runs. `create_deep_agent`
turns the rules into `interrupt_on` entries for the file tools (`interrupt_on_from_permissions`),
so the pause is the ordinary human-in-the-loop request for the tool call itself (its name,
such as `write_file`, and its arguments), answered with approve, edit, reject or respond.
The policy hook then lets those operations through (`gated_by_approval` marks the rules the
gate covers) and asks by itself only where the gate could not see the path: a symlink that
leads into a rule's paths, or a `FilesystemMiddleware` composed without `create_deep_agent`.

Permissions govern the file tools only: a backend that can `execute` shell commands can
reach any path, so rules cannot be promised there (see `check_permissions_apply`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain.agents.middleware import InterruptOnConfig

from fathom.backends._globbing import GlobError, compile_glob
from fathom.backends._paths import PathError, normalize_path
from fathom.backends.errors import BackendError, ErrorKind
from fathom.backends.policy import BackendPolicy, FileOperation
from fathom.backends.protocol import supports_execute

__all__ = [
    "PERMISSION_DECISIONS",
    "FilesystemPermission",
    "PermissionPolicy",
    "check_permissions_apply",
    "first_matching_rule",
    "gated_by_approval",
    "interrupt_on_from_permissions",
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
        mode: `"allow"` (the default), `"deny"`, or `"interrupt"`: a file tool call on
            such a path pauses the run for a person (needs a checkpointer), who approves,
            edits, rejects or answers it (`interrupt_on_from_permissions`). A listing or
            search whose tree overlaps the rule's paths pauses too.

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
            if path == shown and _gated(rule):
                return None  # the `interrupt_on` gate asked before the tool ran
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


_TOOL_OF_OPERATION = {
    "read": ("read_file", "file_path"),
    "write": ("write_file", "file_path"),
    "edit": ("edit_file", "file_path"),
    "delete": ("delete", "file_path"),
    "ls": ("ls", "path"),
    "glob": ("glob", "path"),
    "grep": ("grep", "path"),
}
"""The file tool behind each backend operation, and the name of its path argument."""


def _ask_approval(
    operation: FileOperation, path: str, index: int, rule: FilesystemPermission
) -> str | None:
    """Pause the run for a person to decide on an `interrupt` rule's operation.

    This is the fallback for what the `interrupt_on` gate cannot see (see the module's
    docstring). The interrupt value is a human-in-the-loop request for the file tool
    (`action_requests` with the tool's name and path argument, `review_configs`); resume
    with `{"decisions": [{"type": "approve"}]}` to let it run. Any other decision
    (`reject`, or `respond` / `edit`, which cannot be honoured this deep in the tool)
    refuses it, with the decision's `message` as the reason.
    """
    from langgraph.types import interrupt

    tool, path_arg = _TOOL_OF_OPERATION.get(operation.name, (operation.name, "path"))
    request = {
        "action_requests": [
            {
                "name": tool,
                "args": {path_arg: path, **_plain(operation.arguments)},
                "description": (
                    f"{_VERB[operation.kind].capitalize()} `{path}` needs approval "
                    f"(rule {index}: {rule.describe()})."
                ),
            }
        ],
        "review_configs": [
            {"action_name": tool, "allowed_decisions": ["approve", "reject"]}
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


# --------------------------------------------------------------------------- the approval gate

PERMISSION_DECISIONS: list[Literal["approve", "edit", "reject", "respond"]] = [
    "approve", "edit", "reject", "respond",
]
"""What a person may answer to a file tool call an `interrupt` rule holds (as the reference)."""

_GATED = "_fathom_gated_by_approval"

_FILE_TOOLS: dict[str, tuple[Operation, str, bool, str | None]] = {
    "ls": ("read", "path", True, None),
    "read_file": ("read", "file_path", False, None),
    "write_file": ("write", "file_path", False, None),
    "edit_file": ("write", "file_path", False, None),
    "delete": ("write", "file_path", True, None),
    "glob": ("read", "path", True, "pattern"),
    "grep": ("read", "path", True, None),
}
"""Each file tool: its operation, its path argument, whether that path is the root of what
the call may touch (a listing, a search, a recursive delete) rather than the one file it
touches, and the argument that can move a search elsewhere (`glob`'s absolute `pattern`)."""


def _gated(rule: FilesystemPermission) -> bool:
    return bool(getattr(rule, _GATED, False))


def gated_by_approval(rules: Sequence[FilesystemPermission]) -> list[FilesystemPermission]:
    """`rules`, with each `interrupt` rule marked as covered by the `interrupt_on` gate.

    Give the marked rules to the file tools of an agent whose `HumanInTheLoopMiddleware` has
    the entries of `interrupt_on_from_permissions(rules)`: the person was asked before the
    tool ran, so the policy hook does not ask again. A marked rule equals the rule it copies.
    """
    marked: list[FilesystemPermission] = []
    for rule in rules:
        if isinstance(rule, FilesystemPermission) and rule.mode == "interrupt" and not _gated(rule):
            rule = dataclasses.replace(rule)
            object.__setattr__(rule, _GATED, True)
        marked.append(rule)
    return marked


def _normalized(raw: str) -> str | None:
    try:
        return normalize_path(raw)
    except PathError:
        return None


def _anchor(pattern: str) -> str:
    """The directory a pattern's matches all lie under: its literal part, up to a `/`."""
    full = _full_pattern(pattern)
    literal = _literal_prefix(full)
    if literal == full:
        return full
    return literal[: literal.rfind("/") + 1] or "/"


def _overlap(root: str, anchor: str) -> bool:
    """Whether the tree under `root` and the tree under `anchor` share a path."""
    a, r = anchor.rstrip("/") or "/", root.rstrip("/") or "/"
    return "/" in (a, r) or a == r or a.startswith(r + "/") or r.startswith(a + "/")


def _exact_when(
    rules: Sequence[FilesystemPermission], operation: Operation, argument: str
) -> Callable[[Any], bool]:
    def when(request: Any) -> bool:
        raw = (request.tool_call.get("args") or {}).get(argument)
        path = _normalized(raw) if isinstance(raw, str) else None
        if path is None:
            return False  # the tool answers with the path error
        decided = first_matching_rule(rules, operation, path, directory=False)
        return decided is not None and decided[1].mode == "interrupt"

    return when


def _bulk_when(
    rules: Sequence[FilesystemPermission],
    operation: Operation,
    argument: str,
    pattern_argument: str | None,
) -> Callable[[Any], bool]:
    anchors = [
        _anchor(pattern)
        for rule in rules
        if isinstance(rule, FilesystemPermission)
        and rule.mode == "interrupt"
        and operation in rule.operations
        for pattern in rule.paths
    ]

    def when(request: Any) -> bool:
        args = request.tool_call.get("args") or {}
        raw = args.get(argument, "/")  # the tools' own default: the whole filesystem
        if raw is None:
            return True
        root = _normalized(raw) if isinstance(raw, str) else None
        if root is None:
            return False
        decided = first_matching_rule(rules, operation, root, directory=True)
        if decided is not None and decided[1].mode == "deny":
            return False  # refused anyway; nothing to ask about
        if any(_overlap(root, anchor) for anchor in anchors):
            return True
        pattern = args.get(pattern_argument) if pattern_argument else None
        if isinstance(pattern, str):
            if pattern.startswith("/"):
                return any(_overlap(_anchor(pattern), anchor) for anchor in anchors)
            return ".." in pattern.split("/")
        return False

    return when


def interrupt_on_from_permissions(
    rules: Sequence[FilesystemPermission],
) -> dict[str, InterruptOnConfig]:
    """`interrupt_on` entries that pause the file tools on the paths `interrupt` rules name.

    One entry per file tool whose operation an `interrupt` rule covers, with the decisions
    `PERMISSION_DECISIONS` and a `when` predicate on the call's arguments: a tool that works
    on one file (`read_file`, `write_file`, `edit_file`) pauses when the first rule that
    matches its path is an `interrupt` rule; a tool whose path is the root of what it may
    touch (`ls`, `glob`, `grep`, `delete`) pauses when that tree and an `interrupt` rule's
    paths overlap (a call without a path covers everything). Empty when no rule is an
    `interrupt` rule.
    """
    entries: dict[str, InterruptOnConfig] = {}
    for tool, (operation, argument, bulk, pattern_argument) in _FILE_TOOLS.items():
        if not any(
            isinstance(r, FilesystemPermission) and r.mode == "interrupt"
            and operation in r.operations
            for r in rules
        ):
            continue
        when = (
            _bulk_when(rules, operation, argument, pattern_argument)
            if bulk
            else _exact_when(rules, operation, argument)
        )
        entries[tool] = InterruptOnConfig(
            allowed_decisions=list(PERMISSION_DECISIONS),
            when=when,
            description=_description(rules, operation, argument),
        )
    return entries


def _description(
    rules: Sequence[FilesystemPermission], operation: Operation, argument: str
) -> Callable[..., str]:
    """The request's `description`: the call, and the `interrupt` rules behind the pause."""
    covering = "; ".join(
        f"rule {index}: {rule.describe()}"
        for index, rule in enumerate(rules, start=1)
        if isinstance(rule, FilesystemPermission)
        and rule.mode == "interrupt"
        and operation in rule.operations
    )

    def description(tool_call: Any, state: Any, runtime: Any) -> str:
        args = tool_call.get("args") or {}
        path = args.get(argument, "/")
        return (
            f"`{tool_call.get('name')}` on `{path}` needs approval ({covering}).\n\n"
            f"Tool: {tool_call.get('name')}\nArgs: {args}"
        )

    return description
