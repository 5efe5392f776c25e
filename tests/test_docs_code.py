"""Every Python block of `README.md` and `docs/*.md` runs, offline, with a scripted model.

One test per ```` ```python ```` block (also ```` ```py ````), id `path:line` (the fence's
line). A block is compiled with top-level `await` allowed (and then awaited in a fresh event
loop), with the markdown file's own line numbers, and executed in a fresh namespace, in a
temporary working directory. A block that no longer works against the code fails.

The model. Throughout, `fathom.models.init_chat_model`, the one call behind
`resolve_model` that turns a `"provider:model"` string into a chat model, is wrapped: the
string is still built by LangChain (with dummy API keys and no request sent, so an unknown
provider or a missing provider package still fails), then the setup's `ScriptedModel` is
returned in its place. Nothing else in fathom is patched.

Markers: an HTML comment (invisible once rendered) on the line right before the fence.

- no marker: the block runs as it is (model strings resolve as above);
- `<!-- docs-test: setup=NAME -->`: the namespace is pre-filled by the setup `NAME`
  (`SETUPS` below) with the names the prose around the block implies (`model`, `agent`,
  `inputs`, a stub `internet_search` tool, ...). A setup may start a local server and point
  the block's address at it (`http://127.0.0.1:2024` becomes the server's free port: the
  only change made to a block's text), and may check afterwards what the block did;
- `<!-- docs-test: eval=NAME -->`: the block is Python the *model* writes for the code
  interpreter's `eval` tool. It runs in Monty through a real agent's `eval` (a scripted
  parent sends it), after the setup's prelude (the data the prose describes) and before
  its epilogue (the value to report, if the block ends with an assignment), with that
  setup's scripted subagents (for the six patterns, those of
  `examples/dynamic_subagents/patterns.py`); the tool must not answer an error, and the
  subagents must make the calls the prose counts;
- `<!-- docs-test: needs-network (REASON) -->`: the block cannot run offline (a package
  downloaded at run time, a server nobody can start here). It is only compiled. The reason
  is required; `python tests/test_docs_code.py` prints how many blocks are marked and why.

A `docs-test:` comment that is not right before a Python fence, or that names an unknown
setup, fails `test_every_marker_belongs_to_a_python_block`.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import importlib.util
import inspect
import json
import os
import re
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from markdown_it import MarkdownIt

from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call

ROOT = Path(__file__).resolve().parents[1]
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PYTHON_FENCES = frozenset({"python", "py", "python3"})
MARKER = re.compile(r"<!--\s*docs-test:\s*(?P<body>.*?)\s*-->", re.DOTALL)
NEEDS_NETWORK = re.compile(r"needs-network \((?P<reason>[^()]*\S[^()]*)\)")
WITH_SETUP = re.compile(r"(?P<kind>setup|eval)=(?P<name>[\w-]+)")
DEADLINE_S = 60.0
"""Bounds a hang (a server that does not start); healthy waits end within seconds."""


# --------------------------------------------------------------------------- collecting


@dataclass(frozen=True)
class Block:
    """One Python block of a markdown file, with the `docs-test:` marker before it."""

    path: str
    """Relative to the repository root."""
    line: int
    """The opening fence's line (1-based)."""
    source: str
    marker: str | None
    """The marker comment's text after `docs-test:`, or `None`."""

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def kind(self) -> str:
        """`run`, `setup`, `eval`, `needs-network`, or `invalid` (a marker none of these)."""
        if self.marker is None:
            return "run"
        if NEEDS_NETWORK.fullmatch(self.marker):
            return "needs-network"
        found = WITH_SETUP.fullmatch(self.marker)
        return found["kind"] if found else "invalid"

    @property
    def setup(self) -> str | None:
        found = WITH_SETUP.fullmatch(self.marker or "")
        return found["name"] if found else None

    @property
    def reason(self) -> str:
        found = NEEDS_NETWORK.fullmatch(self.marker or "")
        return found["reason"].strip() if found else ""


def _parse(path: Path) -> tuple[list[Block], list[str]]:
    """The Python blocks of `path`, and the markers that precede no Python block."""
    tokens = MarkdownIt().parse(path.read_text(encoding="utf-8"))
    relative = path.relative_to(ROOT).as_posix()
    blocks: list[Block] = []
    orphans: list[str] = []
    for position, token in enumerate(tokens):
        following = tokens[position + 1] if position + 1 < len(tokens) else None
        if token.type == "html_block" and MARKER.search(token.content):
            is_python = (following is not None and following.type == "fence"
                         and following.info.strip() in PYTHON_FENCES)
            if not is_python:
                orphans.append(f"{relative}:{(token.map or [0])[0] + 1}")
        if token.type != "fence" or token.info.strip() not in PYTHON_FENCES:
            continue
        before = tokens[position - 1] if position else None
        marker = None
        if before is not None and before.type == "html_block":
            found = MARKER.search(before.content)
            marker = found["body"] if found else None
        blocks.append(Block(relative, (token.map or [0])[0] + 1, token.content, marker))
    return blocks, orphans


def collect() -> tuple[list[Block], list[str]]:
    """Every Python block of the docs, and the stray markers."""
    blocks: list[Block] = []
    orphans: list[str] = []
    for path in DOC_FILES:
        found, stray = _parse(path)
        blocks += found
        orphans += stray
    return blocks, orphans


BLOCKS, ORPHANS = collect()


def marked_blocks() -> list[Block]:
    """The blocks marked `needs-network`: only compiled."""
    return [b for b in BLOCKS if b.kind == "needs-network"]


# --------------------------------------------------------------------------- setups


@dataclass
class Setup:
    """What a block runs with."""

    names: dict[str, Any] = field(default_factory=dict)
    """Pre-filled into the block's namespace."""
    model: BaseChatModel | None = None
    """What every `"provider:model"` string resolves to (default: an echoing model)."""
    urls: dict[str, str] = field(default_factory=dict)
    """An address in the block's text -> the address of the setup's local server."""
    check: Callable[[dict[str, Any]], None] | None = None
    """Run on the block's namespace after it ran."""


@dataclass
class Context:
    tmp_path: Path
    monkeypatch: pytest.MonkeyPatch
    stack: contextlib.ExitStack


SETUPS: dict[str, Callable[[Context], Setup]] = {}


def setup(name: str) -> Callable[[Callable[[Context], Setup]], Callable[[Context], Setup]]:
    def register(build: Callable[[Context], Setup]) -> Callable[[Context], Setup]:
        SETUPS[name] = build
        return build

    return register


def echo_model() -> ScriptedModel:
    """Answers every call with the last user message."""
    return ScriptedModel(policy=lambda request: f"(scripted) {request.last_human_text}")


def _tool_then_answer(name: str, args: dict[str, Any]) -> ScriptedModel:
    """Calls tool `name` once per user message, then answers with its result."""

    def policy(request: ScriptRequest) -> Any:
        if request.tool_results:
            return f"From {name}: {request.tool_results[-1].text}"
        return ai("", tool_call(name, args))

    return ScriptedModel(policy=policy)


@setup("research")
def _research(ctx: Context) -> Setup:
    """README's first agent: `internet_search` is a stub; the model searches, then answers."""
    searched: list[str] = []

    @tool
    def internet_search(query: str, max_results: int = 5) -> str:
        """Search the web for `query`."""
        searched.append(query)
        return "LangGraph is a library for stateful, multi-actor applications with LLMs."

    def check(ns: dict[str, Any]) -> None:
        assert searched == ["LangGraph"]
        assert "LangGraph is a library" in ns["result"]["messages"][-1].text

    return Setup(names={"internet_search": internet_search},
                 model=_tool_then_answer("internet_search", {"query": "LangGraph"}),
                 check=check)


@setup("model")
def _model(ctx: Context) -> Setup:
    """`model`: any chat model; here an echoing `ScriptedModel`."""
    model = echo_model()
    return Setup(names={"model": model}, model=model)


def _subagent(name: str, answer: Callable[[str], str]) -> tuple[dict[str, Any], ScriptedModel]:
    """A subagent spec whose scripted model answers `answer(task text)`."""

    def policy(request: ScriptRequest) -> str:
        asked = next((m for m in request.messages if isinstance(m, HumanMessage)), None)
        return answer(str(asked.text) if asked is not None else "")

    model = ScriptedModel(policy=policy)
    spec = {"name": name, "description": f"The {name}.", "model": model, "tools": [],
            "system_prompt": f"You are the {name}. Answer in one message."}
    return spec, model


def _eval_once(code: str, *, id: str = "eval_1") -> ScriptedModel:
    """A parent model that sends `code` to `eval` once per turn, then reports its result."""

    def policy(request: ScriptRequest) -> Any:
        results = [m for m in request.turn_messages if isinstance(m, ToolMessage)]
        if not results:
            return ai("", tool_call("eval", {"code": code}, id=id))
        return f"Result: {results[-1].text}"

    return ScriptedModel(policy=policy)


def _eval_result(messages: list[Any]) -> ToolMessage:
    result = next(m for m in reversed(messages) if isinstance(m, ToolMessage) and m.name == "eval")
    assert result.status != "error", result.text
    return result


@setup("subagents")
def _subagents(ctx: Context) -> Setup:
    """`model`, `researcher`, `writer`: the parent's model sends one `eval` that starts both."""
    researcher, _ = _subagent("researcher", lambda text: f"notes on {text}")
    writer, _ = _subagent("writer", lambda text: f"a draft from {text}")
    code = ('notes = await task("Research LangGraph", "researcher")\n'
            'await task(f"Write it up: {notes}", "writer")')

    def check(ns: dict[str, Any]) -> None:
        assert "a draft from Write it up: notes on Research LangGraph" in (
            _eval_result(ns["result"]["messages"]).text)

    model = _eval_once(code)
    return Setup(names={"model": model, "researcher": researcher, "writer": writer},
                 model=model, check=check)


@setup("eval-events")
def _eval_events(ctx: Context) -> Setup:
    """`agent` runs one `eval` whose code starts a `judge` labelled "plan A vs plan B"."""
    judge, _ = _subagent("judge", lambda text: "plan B")
    code = ('await task("Which is better?\\nfirst: plan A\\nsecond: plan B", "judge", '
            'label="plan A vs plan B")')
    from fathom import create_deep_agent

    agent = create_deep_agent(_eval_once(code, id="eval_7"), subagents=[judge],
                              general_purpose_subagent=False, code_interpreter=True)

    def check(ns: dict[str, Any]) -> None:
        assert ns["chunk"] == {"type": "subagent", "event": "complete", "subagent_type": "judge",
                               "label": "plan A vs plan B", "call_id": "0",
                               "tool_call_id": "eval_7"}

    return Setup(names={"agent": agent, "inputs": {"messages": [("user", "Pick a plan")]}},
                 check=check)


@setup("agent")
def _agent(ctx: Context) -> Setup:
    """`agent` (named "main") writes a todo list, then answers; `inputs` asks it something."""
    from fathom import create_deep_agent

    model = _tool_then_answer("write_todos", {"todos": [
        {"content": "Read the repo", "status": "in_progress"}]})
    agent = create_deep_agent(model, name="main")

    def check(ns: dict[str, Any]) -> None:
        assert len(model.requests) == 2  # the todo call, then the answer

    return Setup(names={"agent": agent, "inputs": {"messages": [("user", "Plan the work")]}},
                 check=check)


@setup("budget-thread")
def _budget_thread(ctx: Context) -> Setup:
    """`model` (echoing), `saver` (in memory), `create_deep_agent` and `Budget`."""
    from langgraph.checkpoint.memory import InMemorySaver

    from fathom import Budget, create_deep_agent

    model = echo_model()

    def check(ns: dict[str, Any]) -> None:
        if "more" in ns:
            assert ns["more"]["messages"][-1].text == "(scripted) more"

    return Setup(names={"model": model, "saver": InMemorySaver(),
                        "create_deep_agent": create_deep_agent, "Budget": Budget},
                 model=model, check=check)


@setup("otlp")
def _otlp(ctx: Context) -> Setup:
    """A local OTLP/HTTP receiver stands in for the collector at `http://localhost:6006`."""
    from tests.tracing.otlp_receiver import OtlpReceiver

    import fathom.tracing

    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                 "OTEL_SDK_DISABLED", "OTEL_SERVICE_NAME"):
        ctx.monkeypatch.delenv(name, raising=False)
    receiver = OtlpReceiver()
    ctx.stack.callback(receiver.close)
    ctx.stack.callback(fathom.tracing.disable)  # also when the block fails half-way

    def check(ns: dict[str, Any]) -> None:
        if "agent" not in ns:  # a block that only turns tracing on
            assert fathom.tracing.is_enabled()
            return
        kinds = {s.attributes.get("openinference.span.kind") for s in receiver.wait_for(2)}
        assert {"AGENT", "LLM"} <= kinds, kinds

    return Setup(urls={"http://localhost:6006": receiver.endpoint}, check=check)


def _served_agent() -> tuple[Any, ScriptedModel]:
    """The agent a local `fathom serve` runs as `agent`, and its model.

    Asked to summarise, it writes `/summary.md`, which waits for approval; anything else it
    echoes.
    """
    from langgraph.checkpoint.memory import InMemorySaver

    from fathom import create_deep_agent

    def policy(request: ScriptRequest) -> Any:
        if request.tool_results:
            return f"Wrote the summary ({request.tool_results[-1].text})"
        if request.last_human_text.startswith("Summarise"):
            return ai("", tool_call("write_file", {"file_path": "/summary.md",
                                                   "content": "fathom is a deep agent harness"}))
        return f"Hello! You said: {request.last_human_text}"

    model = ScriptedModel(policy=policy)
    agent = create_deep_agent(model, interrupt_on={"write_file": True},
                              checkpointer=InMemorySaver())  # the server injects its own
    return agent, model


@contextlib.contextmanager
def serving(graphs: dict[str, Any]) -> Iterator[str]:
    """`create_app(graphs)` with the protocol routes, as `fathom serve` builds it, under
    uvicorn in a thread, on a free loopback port; its URL."""
    import uvicorn

    from fathom.protocols import server_routes
    from fathom.server import create_app

    app = create_app(graphs, routes=server_routes())
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, name="docs-test-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + DEADLINE_S
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(DEADLINE_S)


@setup("server")
def _server(ctx: Context) -> Setup:
    """`fathom serve` at `http://127.0.0.1:2024`: fathom's app on a free port, in this process,
    serving `agent` (`_served_agent`)."""
    agent, model = _served_agent()
    url = ctx.stack.enter_context(serving({"agent": agent}))

    def check(ns: dict[str, Any]) -> None:
        last = model.requests[-1].response.text
        if "main" in ns:  # the A2A client: the write waited for approval, was approved, ran
            assert last.startswith("Wrote the summary"), last
        else:
            assert last == "Hello! You said: hi"

    return Setup(urls={"http://127.0.0.1:2024": url}, check=check)


@setup("crons")
def _crons(ctx: Context) -> Setup:
    """`fathom serve` at `http://127.0.0.1:2024`, as for `server`; the block's cron is gone
    after it ran."""
    agent, _ = _served_agent()
    url = ctx.stack.enter_context(serving({"agent": agent}))

    def check(ns: dict[str, Any]) -> None:
        assert ns["paused"]["enabled"] is False
        assert ns["remaining"] == 0

    return Setup(urls={"http://127.0.0.1:2024": url}, check=check)


MCP_TOOLS_SERVER = ROOT / "tests" / "protocols" / "mcp" / "servers" / "tools_server.py"


@setup("mcp-config")
def _mcp_config(ctx: Context) -> Setup:
    """`config`: one stdio MCP server (the tests' FastMCP `tools_server.py`); `model`."""
    model = echo_model()
    # The start-up timeout only bounds a hang (a loaded machine imports FastMCP slowly).
    config = {"calc": {"command": sys.executable, "args": [str(MCP_TOOLS_SERVER)],
                       "timeout": 120}}

    def check(ns: dict[str, Any]) -> None:
        names = {t.name for t in ns["mcp"].tools}
        assert {"calc_add", "calc_shout"} <= names

    return Setup(names={"config": config, "model": model}, model=model, check=check)


MCP_SERVE_GRAPH = '''
from fathom import create_deep_agent
from fathom.testing import ScriptedModel

graph = create_deep_agent(ScriptedModel(policy=lambda r: f"About: {r.last_human_text}"))
'''


@setup("mcp-serve")
def _mcp_serve(ctx: Context) -> Setup:
    """A project whose `./langgraph.json` serves a scripted agent; `fathom` is on `PATH`."""
    (ctx.tmp_path / "agent.py").write_text(textwrap.dedent(MCP_SERVE_GRAPH), encoding="utf-8")
    (ctx.tmp_path / "langgraph.json").write_text(
        json.dumps({"graphs": {"agent": "./agent.py:graph"}}), encoding="utf-8")
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "fathom").exists(), f"no fathom console script next to {sys.executable}"
    ctx.monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")

    def check(ns: dict[str, Any]) -> None:
        assert ns["reply"].structuredContent["answer"] == "About: What does this project do?"

    return Setup(check=check)


# --------------------------------------------------------------------------- eval setups


@dataclass
class EvalSetup:
    """Code the model writes for `eval`: the prelude, the subagents, their expected calls."""

    prelude: str
    subagents: dict[str, Callable[[str], str]]
    calls: dict[str, int] | None = None
    check: Callable[[str], None] | None = None
    """Run on the `eval` tool's answer."""
    epilogue: str = ""
    """Appended: the value to report, for a block that ends with an assignment."""


def _patterns() -> ModuleType:
    """`examples/dynamic_subagents/patterns.py`, whose scripted subagents the patterns use."""
    name = "docs_dynamic_subagent_patterns"
    if name in sys.modules:
        return sys.modules[name]
    path = ROOT / "examples" / "dynamic_subagents" / "patterns.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _failing_checker(text: str) -> str:
    if "b.txt" in text:
        raise RuntimeError("the checker crashed")
    return "ok"


def eval_setups() -> dict[str, EvalSetup]:
    p = _patterns()

    def handle(prefix: str) -> Callable[[str], str]:
        return lambda text: f"{prefix}: {p._after(text, 'Handle this ticket:')}"

    return {
        "fan-out": EvalSetup("", {"worker": lambda text: f"summary of {text}"},
                             calls={"worker": 20}),
        "checker": EvalSetup(
            'import asyncio\nitems = ["a.txt", "b.txt", "c.txt"]\n',
            # 3 items; the call that raises is not recorded: 2
            {"checker": _failing_checker}, calls={"checker": 2}, epilogue="\nresults",
            check=lambda answer: assert_in("failed: subagent 'checker' failed: RuntimeError: "
                                           "the checker crashed", answer)),
        "classify": EvalSetup(
            "import asyncio\ntickets = " + repr([
                "I was charged twice for my subscription", "The export button crashes the app",
                "Can you add a dark mode?", "Refund my last invoice please"]) + "\n",
            {"classifier": p._classify, "billing-agent": handle("refund issued"),
             "bug-triager": handle("bug filed"), "product-agent": handle("request logged")},
            calls={"classifier": 4, "billing-agent": 2, "bug-triager": 1, "product-agent": 1}),
        "synthesize": EvalSetup(
            'import asyncio\ntopics = ["checkpointing", "streaming", "interrupts", "subgraphs", '
            '"stores"]\n',
            {"researcher": lambda text: f"{p._after(text, 'Research:')} is covered",
             "writer": lambda text: "5 findings"},
            calls={"researcher": 5, "writer": 1}),
        "verify": EvalSetup(
            'import asyncio\nproblems = ["17 * 23", "12 * 12", "31 * 7"]\n'
            'schema = {"type": "object", "properties": {"ok": {"type": "boolean"}, '
            '"flaw": {"type": "string"}}, "required": ["ok"]}\n',
            {"solver": p._solve, "verifier": p._verify}, calls={"solver": 4, "verifier": 4}),
        "generate": EvalSetup(
            'import asyncio\nstyles = ["short", "playful", "technical"]\n'
            'score_schema = {"type": "object", "properties": {"score": {"type": "integer"}}, '
            '"required": ["score"]}\n',
            {"generator": lambda text: json.dumps(p._PROPOSALS[p._after(text, "style")]),
             "scorer": p._score},
            calls={"generator": 3, "scorer": 5}),
        "tournament": EvalSetup(
            textwrap.dedent('''\
                import asyncio
                entrants = ["plan A", "plan B", "plan C", "plan D", "plan E"]
                schema = {"type": "object", "properties": {"winner": {"enum": ["first", "second"]}},
                          "required": ["winner"]}

                async def match(a, b):
                    verdict = await task(f"Which is better?\\nfirst: {a}\\nsecond: {b}", "judge",
                                         response_schema=schema, label=f"{a} vs {b}")
                    return a if verdict["winner"] == "first" else b
                '''),
            {"judge": p._judge}, calls={"judge": 4}),
        "loop": EvalSetup('import asyncio\nstart = "fathom"\n', {"explorer": p._depends},
                          calls={"explorer": 8}),
    }


def assert_in(part: str, text: str) -> None:
    assert part in text, text


def run_eval(code: str, setup: EvalSetup) -> None:
    """Send `setup.prelude + code` to a real agent's `eval` and check what came back."""
    from fathom import create_deep_agent

    built = {name: _subagent(name, answer) for name, answer in setup.subagents.items()}
    agent = create_deep_agent(_eval_once(setup.prelude + code + setup.epilogue),
                              subagents=[spec for spec, _ in built.values()],
                              general_purpose_subagent=False, code_interpreter=True)
    out = asyncio.run(agent.ainvoke({"messages": [HumanMessage("Run the code.")]}))
    answer = _eval_result(out["messages"]).text
    if setup.calls is not None:
        assert {name: len(model.requests) for name, (_, model) in built.items()} == setup.calls
    if setup.check is not None:
        setup.check(answer)


# --------------------------------------------------------------------------- running


def compile_block(block: Block, source: str | None = None) -> Any:
    """The block as code, with top-level `await` allowed and the markdown's line numbers."""
    padded = "\n" * block.line + (block.source if source is None else source)
    return compile(padded, str(ROOT / block.path), "exec",
                   flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)


@pytest.fixture
def offline_models(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Model strings resolve to `holder[0]` after LangChain built them with dummy keys."""
    import fathom.models

    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.setenv(key, "docs-test-offline-key")
    holder: list[Any] = [echo_model()]
    real = fathom.models.init_chat_model

    def offline(model: str, **kwargs: Any) -> BaseChatModel:
        real(model, **kwargs)  # the provider and its package must exist; nothing is sent
        return holder[0]

    monkeypatch.setattr(fathom.models, "init_chat_model", offline)
    yield holder


RUNNABLE = [b for b in BLOCKS if b.kind != "needs-network"]


@pytest.mark.parametrize("block", RUNNABLE, ids=[b.id for b in RUNNABLE])
def test_docs_block_runs(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                         offline_models: list[Any]) -> None:
    monkeypatch.chdir(tmp_path)
    assert block.kind != "invalid", f"{block.id}: unknown docs-test marker {block.marker!r}"
    if block.kind == "eval":
        setups = eval_setups()
        assert block.setup in setups, f"{block.id}: no eval setup {block.setup!r}"
        compile_block(block)  # plain Python syntax, as Monty reads it
        run_eval(block.source, setups[block.setup])
        return
    with contextlib.ExitStack() as stack:
        prepared = Setup()
        if block.kind == "setup":
            assert block.setup in SETUPS, f"{block.id}: no setup {block.setup!r}"
            prepared = SETUPS[block.setup](Context(tmp_path, monkeypatch, stack))
        if prepared.model is not None:
            offline_models[0] = prepared.model
        source = block.source
        for address, local in prepared.urls.items():
            assert address in source, f"{block.id}: the setup expects {address} in the block"
            source = source.replace(address, local)
        namespace: dict[str, Any] = {"__name__": "__main__", **prepared.names}
        result = eval(compile_block(block, source), namespace)
        if inspect.iscoroutine(result):
            asyncio.run(result)
        if prepared.check is not None:
            prepared.check(namespace)


@pytest.mark.parametrize("block", marked_blocks(), ids=[b.id for b in marked_blocks()])
def test_docs_block_marked_needs_network_compiles(block: Block) -> None:
    compile_block(block)


def test_marked_blocks_give_reasons() -> None:
    marked = marked_blocks()
    for block in marked:
        assert len(block.reason) >= 10, f"{block.id}: say why it cannot run offline"
    print(f"{len(BLOCKS)} python blocks: {len(BLOCKS) - len(marked)} run, "
          f"{len(marked)} marked needs-network")


def test_every_marker_belongs_to_a_python_block() -> None:
    assert ORPHANS == []
    evals = eval_setups()
    for block in BLOCKS:
        assert block.kind != "invalid", f"{block.id}: unknown docs-test marker {block.marker!r}"
        if block.kind == "setup":
            assert block.setup in SETUPS, f"{block.id}: no setup {block.setup!r}"
        if block.kind == "eval":
            assert block.setup in evals, f"{block.id}: no eval setup {block.setup!r}"


def test_every_python_fence_is_collected() -> None:
    """A line count of the fences agrees with the markdown parser's (none is missed)."""
    fence = re.compile(r"^\s*```\s*(?:python|py|python3)\s*$", re.MULTILINE)
    for path in DOC_FILES:
        relative = path.relative_to(ROOT).as_posix()
        expected = len(fence.findall(path.read_text(encoding="utf-8")))
        assert sum(b.path == relative for b in BLOCKS) == expected, relative
    assert len(BLOCKS) >= 20


if __name__ == "__main__":  # a summary for docs/testing.md
    marked = marked_blocks()
    print(f"{len(BLOCKS)} python blocks: {len(BLOCKS) - len(marked)} run, "
          f"{len(marked)} marked needs-network")
    for block in marked:
        print(f"  {block.id}: {block.reason}")
