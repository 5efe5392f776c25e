"""The layer contract of `ARCHITECTURE.md`, checked on the source.

Every import in `src/fathom` counts, wherever it stands: at module level, inside a function,
under `if TYPE_CHECKING:`. A module may import modules of its own layer and of the layers
below it, never above; and no chain of imports may lead from a module back to itself.

`from package import name` counts as an import of `package.name` when that is a module,
else of `package` (its `__init__`). A package's `__init__` may re-export its own modules;
its modules must not import names through it (that would be a cycle).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("core", (
        "fathom.errors", "fathom.state", "fathom.prompt", "fathom.usage", "fathom.cache_metrics",
        "fathom.tracing", "fathom.testing", "fathom._frontmatter", "fathom._deferred_httpx_cli",
        "fathom._aliases", "fathom._lazy", "fathom.tool_answers", "fathom.call_hooks",
        "fathom.pricing", "fathom.budget", "fathom.measure",
    )),
    ("foundation", ("fathom.backends", "fathom.profiles", "fathom.models", "fathom.hosting")),
    ("capabilities", ("fathom.middleware", "fathom.tools", "fathom.memory")),
    ("agent", (
        "fathom", "fathom.agent", "fathom.graph", "fathom.runs", "fathom.compact_dispatch",
        "fathom.patterns",
    )),
    ("project", ("fathom.project",)),
    ("server", ("fathom.server",)),
    ("protocols", ("fathom.protocols", "fathom.a2a", "fathom.acp", "fathom.mcp")),
    ("cli", ("fathom.cli",)),
)  # fmt: skip
"""The layers, lowest first, and the modules (by dotted prefix) each holds."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES: dict[str, Path] = {module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def layer_of(module: str) -> int:
    """The index of the layer holding `module` (the longest matching prefix wins)."""
    best: tuple[int, int] | None = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (
                best is None or len(prefix) > best[0]
            ):
                best = (len(prefix), index)
    if best is None:
        raise AssertionError(f"{module} belongs to no layer: add it to LAYERS")
    return best[1]


@dataclass(frozen=True)
class Import:
    source: str
    target: str
    line: int
    typing_only: bool = False
    """Under `if TYPE_CHECKING:`: it counts for the layers, but never runs."""


def _known(name: str) -> str | None:
    """`name`, or the nearest enclosing module fathom has."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(module: str) -> Iterator[Import]:
    """Every fathom module `module` imports, with the line of the import."""
    path = MODULES[module]
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for statement in node.body
        for inner in ast.walk(statement)
    }
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, base] if base else package)
            submodules = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES]
            targets = submodules if len(submodules) == len(node.names) else [*submodules, base]
        for target in targets:
            known = _known(target) if target.startswith("fathom") else None
            if known is not None and known != module:
                yield Import(module, known, node.lineno, id(node) in typing_only)


def _parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def with_packages(graph: dict[str, list[Import]]) -> dict[str, list[Import]]:
    """`graph` plus what importing a module also runs: the `__init__` of each package above
    it (bar the importer's own, already running), with the imports that `__init__` makes at
    run time. Those count for cycles: `a` importing `p.b` runs `p/__init__`, which may lead
    back to `a`."""
    runtime = {m: [i for i in imports if not i.typing_only] for m, imports in graph.items()}
    edges: dict[str, list[Import]] = {}
    for module, imports in runtime.items():
        own = {module, *_parents(module)}
        implicit = [
            Import(module, parent, i.line)
            for i in imports
            for parent in _parents(i.target)
            if parent in MODULES and parent not in own
        ]
        edges[module] = [*imports, *implicit]
    return edges


GRAPH: dict[str, list[Import]] = {module: list(imports_of(module)) for module in MODULES}
RUNTIME_GRAPH = with_packages(GRAPH)


def test_every_module_belongs_to_a_layer() -> None:
    for module in MODULES:
        layer_of(module)


def test_no_module_imports_a_higher_layer() -> None:
    upward = [
        f"{MODULES[i.source].relative_to(SRC)}:{i.line}: {i.source} "
        f"({LAYERS[layer_of(i.source)][0]}) imports {i.target} ({LAYERS[layer_of(i.target)][0]})"
        for imports in GRAPH.values()
        for i in imports
        if layer_of(i.target) > layer_of(i.source)
    ]
    assert upward == []


def _cycles(graph: dict[str, list[Import]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for edge in graph[node]:
            if edge.target not in index:
                visit(edge.target)
                low[node] = min(low[node], low[edge.target])
            elif edge.target in on_stack:
                low[node] = min(low[node], index[edge.target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in MODULES:
        if node not in index:
            visit(node)
    return found


def test_no_cycle_between_modules() -> None:
    assert _cycles(GRAPH) == []


def test_no_cycle_through_the_packages_an_import_runs() -> None:
    assert _cycles(RUNTIME_GRAPH) == []


def test_importing_a_module_runs_its_packages() -> None:
    """The rule behind the test above, on a known pair of the tree."""
    source = "fathom.middleware.execute"
    targets = {i.target for i in RUNTIME_GRAPH[source]}
    assert "fathom.middleware.filesystem" in targets  # via fathom.middleware.filesystem.answers
    assert "fathom.middleware" not in targets  # its own package is already running


def test_every_module_opens_with_a_docstring() -> None:
    missing = [
        str(path.relative_to(SRC))
        for path in MODULES.values()
        if ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) is None
    ]
    assert missing == []


def test_every_package_docstring_names_its_layer() -> None:
    """Each package's `__init__` says "Layer: <name>" as `LAYERS` has it, so the text a reader
    sees cannot drift from the contract."""
    wrong = [
        f"{path.relative_to(SRC)}: no 'Layer: {LAYERS[layer_of(name)][0]}'"
        for name, path in MODULES.items()
        if path.name == "__init__.py"
        and f"Layer: {LAYERS[layer_of(name)][0]}" not in (ast.get_docstring(
            ast.parse(path.read_text(encoding="utf-8"))) or "")
    ]
    assert wrong == []


def test_failed_tool_answers_are_built_in_one_place() -> None:
    """Only `fathom.tool_answers` builds a `ToolMessage` whose status is `"error"`."""
    builders = []
    for name, path in MODULES.items():
        if name == "fathom.tool_answers":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", None)) == "ToolMessage"
                and any(
                    k.arg == "status" and isinstance(k.value, ast.Constant)
                    and k.value.value == "error"
                    for k in node.keywords
                )
            ):
                builders.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert builders == []


BROAD = {"Exception", "BaseException"}
MOST_BROAD_HANDLERS = 25
LOG_CALLS = {"debug", "info", "warning", "error", "exception", "critical", "log"}


def _broad(handler: ast.ExceptHandler) -> bool:
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(k is None or getattr(k, "id", None) in BROAD for k in kinds)


def _logs_raises_or_hands_on(handler: ast.ExceptHandler) -> bool:
    """The handler logs, re-raises, or hands the exception object itself on (assigns it
    for the task that awaits it, say, which raises it)."""
    return any(
        isinstance(node, ast.Raise)
        or (isinstance(node, ast.Call) and getattr(node.func, "attr", None) in LOG_CALLS)
        or (isinstance(node, ast.Assign) and isinstance(node.value, ast.Name)
            and node.value.id == handler.name)
        for statement in handler.body
        for node in ast.walk(statement)
    )


def test_broad_except_handlers_are_few_named_boundaries_that_log_or_raise() -> None:
    """A handler of `Exception` (or bare, or `BaseException`) stays only where a boundary
    is: the line says which (`# boundary (…)`), and its body logs, re-raises or hands the
    exception on. There are
    at most 25 of them; everywhere else the handler names what the callee raises."""
    broad: list[str] = []
    unnamed: list[str] = []
    silent: list[str] = []
    for path in MODULES.values():
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ExceptHandler) and _broad(node):
                where = f"{path.relative_to(SRC)}:{node.lineno}"
                broad.append(where)
                if "boundary" not in lines[node.lineno - 1]:
                    unnamed.append(where)
                if not _logs_raises_or_hands_on(node):
                    silent.append(where)
    assert unnamed == []
    assert silent == []
    assert len(broad) <= MOST_BROAD_HANDLERS, broad


@pytest.mark.parametrize(
    ("source", "target", "allowed"),
    [
        ("fathom.middleware.subagents", "fathom.backends.protocol", True),
        ("fathom.backends.store", "fathom.middleware.subagents", False),
        ("fathom.middleware.subagents", "fathom.server.app", False),
        ("fathom.cli.main", "fathom.protocols.acp.server", True),
        ("fathom.project.build", "fathom.cli.display", False),
    ],
)
def test_the_rule_itself(source: str, target: str, allowed: bool) -> None:
    assert (layer_of(target) <= layer_of(source)) is allowed
