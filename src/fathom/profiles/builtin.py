"""The profiles fathom ships: registered before any plugin, so plugins layer on top.

Harness profiles, each under exact `provider:model` keys so other models of the same
provider are unchanged:

- Claude Opus 4.7, Sonnet 4.6 and Haiku 4.5: a suffix following Anthropic's published
  prompting advice for recent Claude models (independent tool calls in parallel, read
  before answering, weigh each tool result); Opus 4.7 also gets a push towards using tools
  and parallel subagents, which that model otherwise does less than earlier Opus models.
- OpenAI Codex (gpt-5.1/5.2/5.3-codex): a suffix for the way Codex models are trained to
  work (act without waiting, batch independent calls, close every todo before finishing).
- NVIDIA Nemotron 3 Ultra, as served by NVIDIA and other hosts: a suffix on grounding,
  loop control and finishing state changes, a `read_file` description that asks for
  paging through whole files, and one retry of a failed file tool call.

Provider profiles:

- `nvidia`: every request names its originating application in the
  `X-BILLING-INVOKE-ORIGIN` header that NVIDIA NIM reads.
- `openrouter`: refuses `langchain-openrouter` older than 0.2.0, names the application
  (`app_title`, unless `OPENROUTER_APP_TITLE` is set, `app_url` likewise) and keeps Azure out
  of the upstream providers (its Responses API drops the reasoning items a multi-turn run
  replays); `FATHOM_OPENROUTER_ALLOW_AZURE=1` lets Azure back in.
"""

from __future__ import annotations

import logging
import os
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from langchain.agents.middleware import ToolRetryMiddleware
from langchain.agents.middleware.types import AgentMiddleware

from fathom.profiles.harness import HarnessProfile
from fathom.profiles.provider import ProviderProfile

__all__ = [
    "CLAUDE_HAIKU_4_5",
    "CLAUDE_OPUS_4_7",
    "CLAUDE_SONNET_4_6",
    "CODEX_SPECS",
    "NEMOTRON_3_ULTRA_SPECS",
    "OPENROUTER_MIN_VERSION",
    "builtin_harness_profiles",
    "builtin_provider_profiles",
]

logger = logging.getLogger(__name__)

CLAUDE_OPUS_4_7 = "anthropic:claude-opus-4-7"
CLAUDE_SONNET_4_6 = "anthropic:claude-sonnet-4-6"
CLAUDE_HAIKU_4_5 = "anthropic:claude-haiku-4-5"

CODEX_SPECS: tuple[str, ...] = (
    "openai:gpt-5.1-codex",
    "openai:gpt-5.2-codex",
    "openai:gpt-5.3-codex",
)

NEMOTRON_3_ULTRA_SPECS: tuple[str, ...] = (
    # ChatNVIDIA reports its provider as "NVIDIA"; a "nvidia:..." spec string uses lowercase
    "NVIDIA:nvidia/nemotron-3-ultra-550b-a55b",
    "nvidia:nvidia/nemotron-3-ultra-550b-a55b",
    "baseten:nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B",
    "fireworks:accounts/fireworks/models/nemotron-3-ultra-nvfp4",
    "fireworks:accounts/fireworks/models/nemotron-3-ultra-bf16",
    "openrouter:nvidia/nemotron-3-ultra-550b-a55b",
    "nebius:nvidia/Nemotron-3-Ultra-550b-a55b",
    "together:nvidia/nemotron-3-ultra-550b-a55b",
)

_CLAUDE_SUFFIX = """\
<parallel_tool_calls>
When several tool calls do not depend on one another, send them together in one turn \
instead of one after the other: reading three files is three calls in the same turn. \
Call tools one at a time only when a call needs the result of an earlier one, and never \
fill a parameter with a guess or a placeholder.
</parallel_tool_calls>

<read_before_answering>
Do not describe code or files you have not opened. When the user names a file, read it \
first; answer questions about the codebase from what you found, not from what it probably \
contains.
</read_before_answering>

<after_tool_results>
When a tool result arrives, consider what it tells you and whether it is good enough, then \
choose the next step from it.
</after_tool_results>"""

_OPUS_EXTRA = """\

<use_tools>
When the answer depends on files, tests or command output, look with a tool instead of \
recalling: read the file before describing it, run the tests before saying they pass, \
search before saying a name does or does not exist. Working through tools is the normal \
way to work, not a last resort.
</use_tools>

<use_subagents>
Do work you can finish in one reply yourself rather than handing it to a subagent. When \
the work fans out over many items or files, start several subagents in the same turn.
</use_subagents>"""

_CODEX_SUFFIX = """\
## Working style

- Work as an autonomous senior engineer: once the direction is clear, gather context, \
plan, change and verify without stopping for confirmation at each step.
- Carry the task through to the end within this turn when you can: implementation, \
verification and a short account of the outcome, not analysis or a partial fix.
- Prefer acting on reasonable assumptions; end the turn with a question only when you \
are really blocked.
- Skip announcing a plan or a status before acting; act.

## Tool calls

- Before calling tools, work out every file and resource the step needs.
- Send independent reads, searches and other calls together as parallel calls.
- Call in sequence only when the next call depends on a result you have not seen.

## Todos

- Before finishing, settle every item you wrote with write_todos: done, blocked (with a \
one-line reason) or cancelled. Never finish with an item still pending."""

_NEMOTRON_SUFFIX = """\
<approach>
Plan in a few words, then act; send independent reads and lookups as parallel tool calls.
</approach>

<grounding>
Check state with tools instead of remembering it: read a file before describing it, look \
identifiers up, and call the tool that makes a change before saying it is made.
</grounding>

<loop_control>
When a tool call fails, read the error and change the call; never repeat a failing call \
as it was. When a command times out or an error comes back again, shrink the input, add a \
stopping condition or take another approach.
</loop_control>

<tool_selection>
Use the file tools for questions about files, paths and documents only; for questions \
about an API, a service or business records, use the task's own tools. For questions that \
rank, count or pick among records, list the candidates with those tools, fetch the details \
that matter, compare what came back, and answer from the comparison.
</tool_selection>

<state_changes>
A request to book, cancel, update, send, create or otherwise change something outside is \
done only once the tool that does it has succeeded; never just describe the change. After \
it succeeds, answer from the tool's result.
</state_changes>

<final_answer>
The final answer carries the result itself, not just "done": keep the short literal \
values that identify what was done (versions, titles, subjects), turn opaque ids into \
names when a lookup tool exists, and answer each part of a multi-part request from its \
own tool output.
</final_answer>

<follow_up_questions>
Ask only for what you need to proceed safely and correctly, and never again for what the \
user already said. For a broad analysis, ask for the data source and the goal before using \
tools; for a recurring report or workflow, a stated schedule is enough, so ask only for \
what is still missing.
</follow_up_questions>

<context>
When a long conversation turns to an unrelated new task, or before reading a large new \
file late in a long conversation, call compact_conversation first if it is available.
</context>"""

_NEMOTRON_READ_FILE = """\
Read a file (text, source, documents, images, audio, video, PDF).

To read, review or summarize a whole file, keep reading pages until the end of the file \
(or until a result says the offset is past the end): a result with exactly `limit` \
numbered lines is one page, so continue at `offset + limit` before answering about the \
whole file. Smaller pages keep large files from crowding the context.

Arguments:
- `file_path`: the file's absolute path.
- `offset`: the 0-based line to start at.
- `limit`: the most lines to return.

Lines come back numbered; very long lines may be split with continuation markers. Read a \
file before editing it."""

_NEMOTRON_FILE_TOOLS = ("ls", "read_file", "write_file", "edit_file", "delete", "glob", "grep")


def _nemotron_middleware() -> list[AgentMiddleware]:
    """A fresh instance per agent: one immediate retry of a failed file tool call, whose
    error is kept as the answer when the retry fails too."""
    return [
        ToolRetryMiddleware(
            max_retries=1,
            tools=list(_NEMOTRON_FILE_TOOLS),
            on_failure="continue",
            initial_delay=0.0,
            backoff_factor=1.0,
            max_delay=0.0,
            jitter=False,
        )
    ]


OPENROUTER_MIN_VERSION = "0.2.0"
"""The first `langchain-openrouter` release with application attribution."""

_APP_NAME = "fathom"
_APP_URL = "https://pypi.org/project/fathom/"


def _nvidia_kwargs() -> dict[str, Any]:
    """A new header mapping per model, so no two models share (and mutate) one dict."""
    return {"default_headers": {"X-BILLING-INVOKE-ORIGIN": _APP_NAME}}


def _version_tuple(text: str) -> tuple[int, ...] | None:
    parts = []
    for piece in text.split("."):
        digits = "".join(c for c in piece if c.isdigit()) if piece[:1].isdigit() else ""
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts) or None


def check_openrouter_version(_spec: str = "") -> None:
    """Raise `ImportError` when `langchain-openrouter` is older than `OPENROUTER_MIN_VERSION`.

    A missing package is left to `init_chat_model`, which names the package to install.
    """
    try:
        installed = version("langchain-openrouter")
    except PackageNotFoundError:
        return
    found, needed = _version_tuple(installed), _version_tuple(OPENROUTER_MIN_VERSION)
    if found is None:
        logger.warning("cannot read langchain-openrouter version %r; not checking it", installed)
        return
    if needed is not None and found < needed:
        raise ImportError(
            f"fathom needs langchain-openrouter>={OPENROUTER_MIN_VERSION}, but {installed} is "
            f"installed; run: pip install 'langchain-openrouter>={OPENROUTER_MIN_VERSION}'"
        )


def _openrouter_kwargs() -> dict[str, Any]:
    """Attribution unless the user's environment sets it (an empty value opts out), and no
    Azure upstream unless `FATHOM_OPENROUTER_ALLOW_AZURE` is truthy."""
    kwargs: dict[str, Any] = {}
    if os.environ.get("OPENROUTER_APP_URL") is None:
        kwargs["app_url"] = _APP_URL
    if os.environ.get("OPENROUTER_APP_TITLE") is None:
        kwargs["app_title"] = _APP_NAME
    allow = os.environ.get("FATHOM_OPENROUTER_ALLOW_AZURE", "").strip().lower()
    if allow not in {"1", "true", "yes", "on"}:
        kwargs["openrouter_provider"] = {"ignore": ["azure"]}
    return kwargs


def builtin_harness_profiles() -> list[tuple[str, HarnessProfile]]:
    """`(key, profile)` for every harness profile fathom ships, in registration order."""
    claude = HarnessProfile(system_prompt_suffix=_CLAUDE_SUFFIX)
    codex = HarnessProfile(system_prompt_suffix=_CODEX_SUFFIX)
    nemotron = HarnessProfile(
        system_prompt_suffix=_NEMOTRON_SUFFIX,
        tool_description_overrides={"read_file": _NEMOTRON_READ_FILE},
        extra_middleware=_nemotron_middleware,
    )
    return [
        (CLAUDE_OPUS_4_7, HarnessProfile(system_prompt_suffix=_CLAUDE_SUFFIX + _OPUS_EXTRA)),
        (CLAUDE_SONNET_4_6, claude),
        (CLAUDE_HAIKU_4_5, claude),
        *((spec, nemotron) for spec in NEMOTRON_3_ULTRA_SPECS),
        *((spec, codex) for spec in CODEX_SPECS),
    ]


def builtin_provider_profiles() -> list[tuple[str, ProviderProfile]]:
    """`(key, profile)` for every provider profile fathom ships."""
    return [
        ("nvidia", ProviderProfile(init_kwargs_factory=_nvidia_kwargs)),
        ("openrouter", ProviderProfile(pre_init=check_openrouter_version,
                                       init_kwargs_factory=_openrouter_kwargs)),
    ]
