"""Memory: `AGENTS.md`-style files loaded into the system prompt at the start of every run.

Long-term memory is files. `MemoryMiddleware` reads its `sources` through a backend when a
run starts (`before_agent`), keeps their text in the private state key `memory_contents`
(path -> text, as in the reference), and puts the files, in the order given, into a stable
`memory` section of the system prompt, inside `<agent_memory>` tags, after short guidance
on keeping them up to date. A source that was not loaded (missing, binary, too large,
unreadable) is named with the reason, so the agent knows where its memory lives. The agent
changes memory with the ordinary file tools (`edit_file`, `write_file`); because the files
are read again at the start of each run, a change shows in the prompt from the next run on
— in another thread too, when the file lives in a store (`StoreBackend`, or a
`CompositeBackend` route such as `/memories/`).

Within a run the section does not change, so the prompt prefix stays cacheable.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Annotated, Any, NotRequired, Optional

from langchain.agents.middleware.types import (
    AgentMiddleware,
    ModelRequest,
    PrivateStateAttr,
)
from langchain_core.runnables import RunnableConfig
from langgraph.runtime import Runtime
from typing_extensions import TypedDict

from fathom.backends._paths import PathError, normalize_path
from fathom.backends.errors import ErrorKind, error_kind
from fathom.backends.policy import PolicyBackend
from fathom.backends.protocol import (
    BackendProtocol,
    HookRuntime,
    ReadResult,
    adopt,
    resolve_backend,
)
from fathom.backends.state import StateBackend
from fathom.backends.utils import text_view
from fathom.backends.versions import ABSENT
from fathom.middleware.filesystem.answers import describe_error
from fathom.middleware.permissions import FilesystemPermission, PermissionPolicy
from fathom.prompt import (
    AssembledSystemMessage,
    PromptSection,
    SectionPromptMixin,
    check_prompt_template,
    sections_of,
)
from fathom.state import FilesState

__all__ = [
    "MAX_MEMORY_FILE_BYTES",
    "MEMORY_GUIDANCE",
    "MEMORY_SYSTEM_PROMPT",
    "NO_MEMORY_NOTE",
    "MemoryFile",
    "MemoryMiddleware",
    "MemoryState",
    "MemoryStateUpdate",
    "render_memory",
]

MAX_MEMORY_FILE_BYTES = 32 * 1024
"""Largest memory file put into the prompt (32 KiB, roughly 8,000 tokens); larger ones are
skipped with a note, since memory is repeated in every model call."""

MEMORY_GUIDANCE = """## Memory

These files are your long-term memory, loaded at the start of this run: follow them as standing instructions and facts about the user and the project. When the user states a lasting preference, corrects you, or tells you something that will matter in later conversations, update the relevant file with `edit_file` (or `write_file` for one not created yet) before you reply; changes take effect from the next run. Keep entries short and general, and never store secrets such as passwords, API keys or tokens."""  # noqa: E501
"""The guidance that heads the `memory` prompt section."""

_MEMORY_BLOCK = "<agent_memory>\n{agent_memory}\n</agent_memory>"

MEMORY_SYSTEM_PROMPT = MEMORY_GUIDANCE.rstrip("\n") + "\n\n" + _MEMORY_BLOCK
"""The default `system_prompt` template: the guidance, then the memory files in place of
`{agent_memory}`, inside `<agent_memory>` tags (with the default, the `guidance=` argument
gives the heading)."""

NOT_CREATED_NOTE = "(not created yet; create it with write_file when there is something to keep)"
EMPTY_NOTE = "(empty)"
NO_MEMORY_NOTE = "(No memory loaded)"
"""What `{agent_memory}` holds when no source has anything to show (the reference's marker)."""

_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


def strip_html_comments(text: str) -> str:
    """`text` without its `<!-- ... -->` comments (markers tools leave in memory files)."""
    return _HTML_COMMENT.sub("", text)

Backend = BackendProtocol | Callable[[Any], BackendProtocol]


class MemoryFile(TypedDict):
    """What one memory source held at the start of the run: its text, or why there is none."""

    content: NotRequired[str]
    """The file's text (loaded)."""
    note: NotRequired[str]
    """Why nothing was loaded (missing, binary, too large, unreadable)."""


class MemoryState(FilesState):
    """Agent state with the memory loaded for the current run (private: not input/output),
    and the `files` channel a `StateBackend` reads them from (so the middleware works on
    its own under `create_agent`)."""

    memory_contents: NotRequired[Annotated[dict[str, str], PrivateStateAttr]]
    """The text of each source that was loaded, by path (the reference's key)."""
    memory_notes: NotRequired[Annotated[dict[str, str], PrivateStateAttr]]
    """Why a source shows no text, by path: not created yet, empty, binary, too large,
    unreadable. Written by every load, so it also tells a later run that memory was loaded
    by an earlier one (and is read again) rather than given by the caller."""
    memory_versions: NotRequired[Annotated[dict[str, str], PrivateStateAttr]]
    """The version of each memory file as loaded (`ABSENT` for one not created yet), so a
    `write_file` based on what the prompt showed is refused when another writer changed
    the file since (see `fathom.middleware.filesystem.versions`)."""


def _source_path(source: object) -> str:
    """The path a source is read at: absolute ones normalised, relative ones kept relative.

    A relative path means "from the backend's root", which only the backend knows: `/` for
    the in-state, store and virtual-mode filesystem backends, `root_dir` for a
    `FilesystemBackend` outside virtual mode. So `./AGENTS.md` becomes `AGENTS.md` (and
    `/AGENTS.md` on every backend whose root is `/`), never the machine's `/AGENTS.md`.
    """
    if not isinstance(source, str):
        raise TypeError(f"memory sources are paths (str), not {type(source).__name__}")
    try:
        normalized = normalize_path(source)
    except PathError as error:
        raise ValueError(f"memory source {source!r} cannot be used: {error}") from None
    if normalized == "/":
        raise ValueError(f"memory source {source!r} is the root directory, not a file.")
    return normalized if source.strip().startswith("/") else normalized[1:]


def _loaded(path: str, result: ReadResult, max_bytes: int) -> MemoryFile:
    """Turn one read into what the prompt shows for it."""
    if result.error is not None or result.file_data is None:
        if error_kind(result.error) is ErrorKind.NOT_FOUND:
            return MemoryFile(note=NOT_CREATED_NOTE)
        text = describe_error(result.error, path, tool="read_file") if result.error else ""
        error = (text or "the backend returned no data").removeprefix("Error: ")
        return MemoryFile(note=f"(not loaded: {error})")
    view = text_view(result.file_data)
    if view.binary:
        return MemoryFile(note="(not loaded: it is a binary file, not text)")
    if view.size > max_bytes:
        return MemoryFile(
            note=(
                f"(not loaded: {view.size:,} bytes is over the {max_bytes:,}-byte limit for "
                "memory files; read it with read_file when you need it, and keep memory short)"
            )
        )
    return MemoryFile(content=view.text or "")


def _versions(reads: Mapping[str, ReadResult]) -> dict[str, str]:
    """The version of each absolute source as read: the backend's, or `ABSENT` for a
    missing file; sources the backend reports no version for are left out."""
    versions: dict[str, str] = {}
    for path, read in reads.items():
        if not path.startswith("/"):
            continue
        if read.error is not None:
            if error_kind(read.error) is ErrorKind.NOT_FOUND:
                versions[path] = ABSENT
        elif (version := getattr(read, "version", None)) is not None:
            versions[path] = version
    return versions


class MemoryStateUpdate(TypedDict):
    """What `before_agent` returns when it loaded memory (each key only when it changed)."""

    memory_contents: NotRequired[dict[str, str]]
    memory_notes: NotRequired[dict[str, str]]
    memory_versions: NotRequired[dict[str, str]]


def _file_blocks(
    sources: Sequence[str], files: Mapping[str, MemoryFile], absent: str | None
) -> str:
    """One `<memory_file>` block per source, in order; a source `files` lacks shows `absent`
    (or is left out when `absent` is `None`). HTML comments are not shown."""
    blocks: list[str] = []
    for path in sources:
        entry = files.get(path)
        if entry is None:
            if absent is None:
                continue
            entry = MemoryFile(note=absent)
        text = strip_html_comments(entry.get("content", "")).strip("\n")
        if text.strip():
            body = text
        elif "note" in entry or absent is not None:
            body = entry.get("note", EMPTY_NOTE)
        else:
            continue  # loaded, but nothing to show (empty, or only comments)
        blocks.append(f'<memory_file path="{path}">\n{body}\n</memory_file>')
    return "\n\n".join(blocks)


def render_memory(
    sources: Sequence[str], files: Mapping[str, MemoryFile], guidance: str = MEMORY_GUIDANCE
) -> str:
    """The text of the `memory` section: `guidance`, then each source in order (inside
    `<agent_memory>` tags when there is guidance; a source missing from `files` is named as
    not loaded in this run)."""
    blocks = _file_blocks(sources, files, "(not loaded in this run)")
    if not guidance.strip():
        return blocks
    return guidance.strip("\n") + "\n\n" + _MEMORY_BLOCK.replace(
        "{agent_memory}", blocks or NO_MEMORY_NOTE
    )


def _memory_files(
    contents: Mapping[str, str], notes: Mapping[str, str]
) -> dict[str, MemoryFile]:
    files: dict[str, MemoryFile] = {path: MemoryFile(note=note) for path, note in notes.items()}
    for path, text in contents.items():
        files[path] = MemoryFile(content=text, **({"note": notes[path]} if path in notes else {}))
    return files


class MemoryMiddleware(SectionPromptMixin, AgentMiddleware[MemoryState, Any, Any]):
    """Loads `AGENTS.md`-style memory files into the system prompt at the start of each run.

    Args:
        backend: Where the files live: a `BackendProtocol` or a factory
            `(runtime) -> BackendProtocol` (called once per run with a `HookRuntime`).
            Defaults to `StateBackend()`. Usually the agent's own backend, so the file
            tools reach the same files.
        sources: Paths of the memory files, combined in this order (e.g. user memory, then
            project memory). Absolute paths are normalised; a relative path such as
            `./AGENTS.md` is taken from the backend's root.
        permissions: Optional `FilesystemPermission` rules: a source whose reading they
            deny is not loaded (pass the agent's rules so memory cannot bypass them).
        max_file_bytes: Larger files are skipped with a note instead of loaded.
        guidance: Replaces the guidance that heads the section.
        system_prompt: A template for the section with an `{agent_memory}` slot where the
            files go (the default is the guidance, then the files inside `<agent_memory>`
            tags); `None` adds no section (the files are still loaded into state).
        add_cache_control: With an Anthropic chat model (`ChatAnthropic`), end the system
            prompt's text block after the memory section with a `cache_control:
            {"type": "ephemeral"}` marker: a second cache breakpoint next to the one
            `AnthropicPromptCachingMiddleware` sets, so the prefix up to memory stays cached
            when what follows it changes. Other models get no marker.

    Raises:
        TypeError: `sources` is a single string, or holds something other than strings;
            `system_prompt` that is not a string or `None`.
        ValueError: a source is not a usable path (empty, `~`, above the root, ...); a
            `system_prompt` without `{agent_memory}`.

    A missing file is not an error: the section names it as "not created yet", so the agent
    knows where to create it. Binary, oversized and unreadable files are named with the
    reason they were not loaded; HTML comments in a file are left out of the prompt. Each
    state key is written only when what was read differs from the previous run's.
    """

    state_schema = MemoryState

    def __init__(
        self,
        *,
        backend: Backend | None = None,
        sources: Sequence[str],
        permissions: Sequence[FilesystemPermission] | None = None,
        max_file_bytes: int = MAX_MEMORY_FILE_BYTES,
        guidance: str = MEMORY_GUIDANCE,
        system_prompt: str | None = MEMORY_SYSTEM_PROMPT,
        add_cache_control: bool = False,
    ) -> None:
        super().__init__()
        if system_prompt is not None and not isinstance(system_prompt, str):
            raise TypeError(
                f"system_prompt must be str or None, not {type(system_prompt).__name__}"
            )
        check_prompt_template(
            system_prompt, "agent_memory", "the memory files", "keep memory out of the prompt"
        )
        self.system_prompt = system_prompt
        self.add_cache_control = add_cache_control
        if isinstance(sources, str):
            raise TypeError(f"sources is a list of paths, e.g. [{sources!r}], not a string")
        if max_file_bytes <= 0:
            raise ValueError(f"max_file_bytes must be positive, not {max_file_bytes!r}")
        self.backend: Backend = adopt(backend) if backend is not None else StateBackend()
        self.sources: tuple[str, ...] = tuple(dict.fromkeys(_source_path(s) for s in sources))
        self.permissions = list(permissions or [])
        self.max_file_bytes = max_file_bytes
        self.guidance = guidance
        # What a request shows before `before_agent` has loaded anything (never in practice).
        self.section = PromptSection("memory", "")

    @property
    def _backend(self) -> Backend:
        """The backend (or factory) as given: the reference's attribute name."""
        return self.backend

    # ------------------------------------------------------------------ loading

    def _resolved_backend(self, state: Any, runtime: Runtime | None) -> BackendProtocol:
        resolved = resolve_backend(self.backend, HookRuntime(state, runtime))
        if self.permissions:
            return PolicyBackend(resolved, [PermissionPolicy(self.permissions)])
        return resolved

    def _update(self, state: Any, reads: dict[str, ReadResult]) -> dict[str, Any] | None:
        """The state update for what was read (a `MemoryStateUpdate`): each key only when
        it changed."""
        contents: dict[str, str] = {}
        notes: dict[str, str] = {}
        for path, read in reads.items():
            loaded = _loaded(path, read, self.max_file_bytes)
            if "content" in loaded:
                contents[path] = loaded["content"]
                if not strip_html_comments(loaded["content"]).strip():
                    notes[path] = EMPTY_NOTE
            else:
                notes[path] = loaded.get("note", EMPTY_NOTE)
        versions = _versions(reads)
        previous = state if isinstance(state, Mapping) else {}
        update: dict[str, Any] = {}
        if previous.get("memory_contents") != contents:
            update["memory_contents"] = contents
        if previous.get("memory_notes") != notes:
            update["memory_notes"] = notes
        if versions and previous.get("memory_versions") != versions:
            update["memory_versions"] = versions
        return update or None

    @staticmethod
    def _given_by_caller(state: Any) -> bool:
        """Whether `state` holds memory that no run of this middleware loaded (the caller
        put `memory_contents` there): it is used as it is, as in the reference."""
        return isinstance(state, Mapping) and "memory_contents" in state and (
            "memory_notes" not in state
        )

    def before_agent(
        self,
        state: MemoryState,
        runtime: Runtime | None = None,
        config: Optional[RunnableConfig] = None,  # noqa: UP045  # the spelling LangGraph accepts
    ) -> dict[str, Any] | None:
        """Read every source and keep the result in state (only what changed).

        `None` when nothing changed since the previous run, or when the caller already put
        `memory_contents` in the state. `config` is accepted for the reference's signature.
        """
        if self._given_by_caller(state):
            return None
        backend = self._resolved_backend(state, runtime)
        return self._update(state, {path: backend.read(path) for path in self.sources})

    async def abefore_agent(
        self,
        state: MemoryState,
        runtime: Runtime | None = None,
        config: Optional[RunnableConfig] = None,  # noqa: UP045  # the spelling LangGraph accepts
    ) -> dict[str, Any] | None:
        """Async `before_agent`, on the backend's async `aread`."""
        if self._given_by_caller(state):
            return None
        backend = self._resolved_backend(state, runtime)
        return self._update(state, {path: await backend.aread(path) for path in self.sources})

    # ------------------------------------------------------------------ the prompt

    def _format_agent_memory(
        self,
        contents: Mapping[str, str],
        template: str = MEMORY_SYSTEM_PROMPT,
        notes: Mapping[str, str] | None = None,
    ) -> str:
        """`template` with the memory files in its `{agent_memory}` slot.

        The sources come in their order, each with its text from `contents` (or its note from
        `notes`); a source in neither is left out, and with nothing to show the slot holds
        `NO_MEMORY_NOTE`. With the default template, `guidance` heads the text.
        """
        body = _file_blocks(self.sources, _memory_files(contents, notes or {}), None)
        if template is MEMORY_SYSTEM_PROMPT:
            template = (
                self.guidance.strip("\n") + "\n\n" + _MEMORY_BLOCK
                if self.guidance.strip()
                else _MEMORY_BLOCK
            )
        return template.replace("{agent_memory}", body or NO_MEMORY_NOTE)

    def section_for(self, state: Mapping[str, Any] | None) -> PromptSection:
        """The stable `memory` section for a run whose state is `state` (empty, so no
        section is added, with `system_prompt=None`)."""
        if self.system_prompt is None:
            return self.section
        state = state if isinstance(state, Mapping) else {}
        text = self._format_agent_memory(
            state.get("memory_contents") or {}, self.system_prompt, state.get("memory_notes")
        )
        return PromptSection("memory", text)

    def section_for_request(self, request: ModelRequest) -> PromptSection:
        """The memory section built from the files loaded into this run's state (with a
        cache breakpoint after it for Anthropic models when `add_cache_control`)."""
        section = self.section_for(request.state)
        if self.add_cache_control and section.text.strip() and _is_anthropic(request.model):
            return replace(section, cache_breakpoint=True)
        return section

    def modify_request(self, request: ModelRequest) -> ModelRequest:
        """`request` with the memory section in its system message (the same request when
        there is nothing to add). With `add_cache_control`, an Anthropic model and
        `system_prompt=None`, the prompt's last block gets the cache breakpoint instead."""
        section = self.section_for_request(request)
        if section.text.strip():
            return self._with_section(request)
        if self.add_cache_control and _is_anthropic(request.model):
            return _with_breakpoint_at_end(request)
        return request

    def rewrite_model_request(self, request: ModelRequest) -> ModelRequest:
        return self.modify_request(request)


_RANK = {"stable": 0, "conditional": 1, "volatile": 2}


def _with_breakpoint_at_end(request: ModelRequest) -> ModelRequest:
    """`request` with a cache breakpoint after the last text of its system prompt."""
    message = request.system_message
    sections = sections_of(message)
    leading = list(message.leading) if isinstance(message, AssembledSystemMessage) else []
    if sections:
        last = max(range(len(sections)), key=lambda i: (_RANK[sections[i].stability], i))
        sections[last] = replace(sections[last], cache_breakpoint=True)
    elif leading:
        leading[-1] = {**leading[-1], "cache_control": {"type": "ephemeral"}}
    else:
        return request
    return request.override(system_message=AssembledSystemMessage.from_sections(sections, leading))


def _is_anthropic(model: object) -> bool:
    """Whether `model` is a `langchain_anthropic` chat model (without importing the package:
    an instance exists only once its module is loaded)."""
    module = sys.modules.get("langchain_anthropic.chat_models")
    chat_anthropic = getattr(module, "ChatAnthropic", None)
    return isinstance(chat_anthropic, type) and isinstance(model, chat_anthropic)
