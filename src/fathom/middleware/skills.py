"""Skills: folders with a `SKILL.md` that the agent finds by description and reads when useful.

A skill source is a directory (a virtual path such as `/skills/`) whose subdirectories are
skills: each holds a `SKILL.md` that starts with YAML front matter (`name`, `description`,
optionally `license`, `allowed-tools`, `metadata`, ...) followed by instructions, and may
hold scripts, references and templates that the instructions point to.

Before every run, `SkillsMiddleware` lists its sources through the backend and reads each
`SKILL.md`; the catalogue (name, description, path) goes into the thread's state, and the
system prompt lists it. The instructions themselves stay in the files until the model
decides a skill fits the task and reads its `SKILL.md` with `read_file` (progressive
disclosure). A broken skill is skipped with a `SkillWarning`; it never stops the agent.
"""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, NotRequired, Optional

from langchain.agents.middleware.types import (
    AgentMiddleware,
    ModelRequest,
    PrivateStateAttr,
)
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langchain_core.tools import tool as as_tool
from langgraph.runtime import Runtime
from typing_extensions import TypedDict

from fathom._frontmatter import FrontMatterError, parse_front_matter
from fathom.backends.errors import ErrorKind, error_kind
from fathom.backends.protocol import (
    BackendProtocol,
    Call,
    HookRuntime,
    LsResult,
    adopt,
    adrive,
    arun_call,
    drive,
    resolve_backend,
    run_call,
)
from fathom.backends.state import StateBackend
from fathom.middleware.filesystem.answers import describe_error
from fathom.prompt import PromptSection, SectionPromptMixin, check_prompt_template
from fathom.state import FilesState

__all__ = [
    "MAX_COMPATIBILITY_CHARS",
    "MAX_DESCRIPTION_CHARS",
    "MAX_SKILL_COMPATIBILITY_LENGTH",
    "MAX_SKILL_DESCRIPTION_LENGTH",
    "MAX_SKILL_FILE_BYTES",
    "MAX_SKILL_FILE_SIZE",
    "SKILLS_PROMPT",
    "SKILLS_STATE_KEY",
    "SKILLS_SYSTEM_PROMPT",
    "SKILL_FILE",
    "SkillMetadata",
    "SkillWarning",
    "SkillsMiddleware",
    "SkillsState",
    "parse_skill",
    "skills_section",
]

logger = logging.getLogger("fathom.skills")

SKILL_FILE = "SKILL.md"
"""The file that makes a directory a skill."""

MAX_SKILL_FILE_BYTES = 10 * 1024 * 1024
"""A `SKILL.md` larger than this (10 MiB) is skipped."""

MAX_DESCRIPTION_CHARS = 1024
"""Longer descriptions are cut to this many characters."""
MAX_COMPATIBILITY_CHARS = 500
"""Longer `compatibility` fields are cut to this many characters (the Agent Skills limit)."""

MAX_SKILL_FILE_SIZE = MAX_SKILL_FILE_BYTES
MAX_SKILL_DESCRIPTION_LENGTH = MAX_DESCRIPTION_CHARS
MAX_SKILL_COMPATIBILITY_LENGTH = MAX_COMPATIBILITY_CHARS
"""The three limits above under the reference's names."""

SKILLS_STATE_KEY = "skills_metadata"
"""The private state key holding the catalogue (one agent's own: keep it out of subagents)."""

SKILLS_PROMPT = """## Skills

Skills are instructions for particular kinds of task, each in its own folder. Available skills (name, file: when to use it):

{skills_list}

To use a skill: 1. Match: compare the task with the descriptions; use a skill only when its description fits. 2. Read: read its whole SKILL.md with `read_file` at the path shown. 3. Follow its instructions. It names any supporting files (scripts, references, templates), with paths relative to its folder; read those only when you need them."""  # noqa: E501
"""The skills section of the system prompt; `{skills_list}` becomes one line per skill."""

SKILLS_SYSTEM_PROMPT = SKILLS_PROMPT
"""`SKILLS_PROMPT` under the reference's name (the default `system_prompt=`)."""


class SkillWarning(UserWarning):
    """A skill that could not be loaded, or was loaded with a change (a cut description)."""


class SkillMetadata(TypedDict):
    """One skill of the catalogue: what the model sees, and where the skill came from."""

    name: str
    """The skill's name; equal to its directory's name."""
    description: str
    """When to use the skill (at most `MAX_DESCRIPTION_CHARS` characters)."""
    path: str
    """The path of its `SKILL.md`, as the backend lists it (the path `read_file` takes)."""
    source: str
    """The skill source it was loaded from, as given to the middleware."""
    license: str | None
    """The `license` field: a licence name or the name of a bundled licence file."""
    compatibility: str | None
    """The `compatibility` field: what the skill needs from its environment (at most
    `MAX_COMPATIBILITY_CHARS` characters)."""
    metadata: dict[str, str]
    """The `metadata` mapping, values as strings (a list of `include_tools` is joined
    with spaces, the spec's form)."""
    allowed_tools: list[str]
    """The tools the skill says it uses (`allowed-tools`: a spaced or comma-separated
    string, or a list). Informational: it does not limit the agent's tools."""
    extra: dict[str, Any]
    """The other front-matter fields (`license`, `allowed-tools`, `metadata`, ...), as parsed."""


class SkillsState(FilesState):
    """Agent state with the skill catalogue (private: not an input or output of the graph)."""

    skills_metadata: NotRequired[Annotated[list[SkillMetadata] | None, PrivateStateAttr]]
    """The catalogue; `None` (as in the reference) asks the next run to load it again,
    which every run does anyway."""
    skills_load_errors: NotRequired[Annotated[list[str], PrivateStateAttr]]
    """Why skills or sources were skipped at the last load (also logged and warned as
    `SkillWarning`s). Written by every load, so it also tells a later run that the
    catalogue was loaded by an earlier one rather than given by the caller."""


Backend = BackendProtocol | Callable[[Any], BackendProtocol]


# --------------------------------------------------------------------------- parsing

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def parse_skill(
    content: str, *, path: str, source: str, directory_name: str
) -> tuple[SkillMetadata | None, list[str]]:
    """Parse the text of a `SKILL.md` into a catalogue entry.

    Args:
        content: The file's text.
        path: The path of the `SKILL.md` (kept in the entry, named in problems).
        source: The skill source it was found in.
        directory_name: The name of the skill's directory, which `name` must equal.

    Returns:
        The entry (`None` when the skill must be skipped) and the problems found, each a
        sentence naming `path`. A cut description is a problem of a loaded skill.
    """
    try:
        data, _body = parse_front_matter(content)
    except FrontMatterError as error:  # a broken skill is skipped, it never stops the agent
        where = f"`{path}`" if error.line is None else f"`{path}`, line {error.line}"
        return None, [f"Skipped skill {where}: {error.reason}."]
    problems: list[str] = []
    for field in ("name", "description"):
        value = data.get(field)
        if value is None:
            problems.append(f"Skipped skill `{path}`: the front matter has no '{field}'.")
        elif not isinstance(value, str) or not value.strip():
            problems.append(
                f"Skipped skill `{path}`: '{field}' must be a non-empty string, not {value!r} "
                "(quote it in the YAML)."
            )
    if problems:
        return None, problems
    name: str = data["name"].strip()
    if name != directory_name:
        return None, [
            f"Skipped skill `{path}`: its name {name!r} differs from its directory name "
            f"{directory_name!r}; the Agent Skills spec requires them to be equal."
        ]
    if _CONTROL.search(name):
        return None, [f"Skipped skill `{path}`: its name {name!r} contains control characters."]
    description: str = data["description"].strip()
    if len(description) > MAX_DESCRIPTION_CHARS:
        problems.append(
            f"Skill `{path}`: its description has {len(description):,} characters; it was cut "
            f"to {MAX_DESCRIPTION_CHARS:,}."
        )
        description = description[:MAX_DESCRIPTION_CHARS]
    compatibility = _text_field(data.get("compatibility"))
    if compatibility is not None and len(compatibility) > MAX_COMPATIBILITY_CHARS:
        problems.append(
            f"Skill `{path}`: its compatibility has {len(compatibility):,} characters; it "
            f"was cut to {MAX_COMPATIBILITY_CHARS:,}."
        )
        compatibility = compatibility[:MAX_COMPATIBILITY_CHARS]
    metadata, note = _metadata_field(data.get("metadata"))
    if note:
        problems.append(f"Skill `{path}`: {note}")
    allowed, note = _allowed_tools_field(data.get("allowed-tools", data.get("allowed_tools")))
    if note:
        problems.append(f"Skill `{path}`: {note}")
    extra = {key: value for key, value in data.items() if key not in ("name", "description")}
    entry = SkillMetadata(
        name=name,
        description=description,
        path=path,
        source=source,
        license=_text_field(data.get("license")),
        compatibility=compatibility,
        metadata=metadata,
        allowed_tools=allowed,
        extra=extra,
    )
    return entry, problems


def _text_field(value: Any) -> str | None:
    """An optional text field: `None` when absent or blank."""
    text = "" if value is None else str(value).strip()
    return text or None


def _metadata_field(value: Any) -> tuple[dict[str, str], str | None]:
    """`metadata` as a str-to-str mapping, and a note when it was not a mapping."""
    if value is None:
        return {}, None
    if not isinstance(value, Mapping):
        return {}, f"its metadata is {type(value).__name__}, not a mapping; it was ignored."
    result: dict[str, str] = {}
    for key, item in value.items():
        if isinstance(item, list) and key == "include_tools":
            result[str(key)] = " ".join(str(name) for name in item)
        else:
            result[str(key)] = item if isinstance(item, str) else str(item)
    return result, None


def _allowed_tools_field(value: Any) -> tuple[list[str], str | None]:
    """`allowed-tools` as tool names, and a note when it had an unusable type."""
    if value is None:
        return [], None
    if isinstance(value, str):
        return [name for name in re.split(r"[\s,]+", value) if name], None
    if isinstance(value, list):
        return [str(n).strip() for n in value if isinstance(n, str) and n.strip()], None
    return [], (
        f"its allowed-tools is {type(value).__name__}; give a list or a spaced string of "
        "tool names. It was ignored."
    )


# --------------------------------------------------------------------------- loading
#
# Loading is written once, as a plan: a generator that yields the backend calls it needs
# (`ls`, `read`) and receives their results. `drive` serves it with the backend's sync
# methods, `adrive` with its async ones.


@dataclass(frozen=True)
class _Loaded:
    skills: list[SkillMetadata]
    problems: list[str]


def _missing(error: object) -> bool:
    """Whether a backend error means the path does not exist (by its kind, never its text)."""
    return error_kind(error) is ErrorKind.NOT_FOUND


def _dir_name(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1]


def _skill_dirs(source: str, listing: LsResult) -> list[str]:
    """The directories of `source` to look for a `SKILL.md` in, without trailing `/`.

    Every subdirectory, and the source itself first when it holds a `SKILL.md` (so a
    path naming one skill's folder works as a source too).
    """
    entries = listing.entries or []
    dirs = sorted(
        entry["path"].rstrip("/")
        for entry in entries
        if entry.get("is_dir") or entry["path"].endswith("/")
    )
    own = [
        entry["path"].rsplit("/", 1)[0]
        for entry in entries
        if not (entry.get("is_dir") or entry["path"].endswith("/"))
        and entry["path"].rsplit("/", 1)[-1] == SKILL_FILE
    ]
    return own[:1] + dirs


def _load_plan(backend: BackendProtocol, sources: Sequence[str]) -> Generator[Call, Any, _Loaded]:
    """Read every source in order; a later skill replaces an earlier one of the same name."""
    found: dict[str, SkillMetadata] = {}
    problems: list[str] = []
    for source in sources:
        listing: LsResult = yield Call(backend, "ls", (source,))
        if listing.error:
            if _missing(listing.error):
                logger.debug("Skill source %s does not exist; nothing to load", source)
            else:
                error = describe_error(listing.error, source, tool="ls")
                # the reference's words first: callers may look for them
                problems.append(f"Cannot load skills from '{source}': {error}")
            continue
        directories = _skill_dirs(source, listing)
        paths = [f"{directory}/{SKILL_FILE}" for directory in directories]
        # every SKILL.md of the source in one call: one round trip for a remote sandbox
        responses: list[Any] = (yield Call(backend, "download_files", (paths,))) if paths else []
        for directory, path, response in zip(directories, paths, responses, strict=False):
            error = getattr(response, "error", None)
            content = getattr(response, "content", None)
            if error is not None or content is None:
                if _missing(error):
                    logger.debug("%s has no %s; not a skill", directory, SKILL_FILE)
                else:
                    text = describe_error(error, path, tool="read_file") if error else ""
                    problems.append(
                        f"Skipped skill `{path}`: {text or 'the backend returned no data'}"
                    )
                continue
            if len(content) > MAX_SKILL_FILE_BYTES:
                problems.append(
                    f"Skipped skill `{path}`: it is {len(content):,} bytes, over the "
                    f"{MAX_SKILL_FILE_BYTES:,}-byte limit for a {SKILL_FILE}."
                )
                continue
            try:
                skill_text = None if b"\x00" in content else content.decode("utf-8")
            except UnicodeDecodeError:
                skill_text = None
            if skill_text is None:
                problems.append(f"Skipped skill `{path}`: it is binary, not text.")
                continue
            entry, found_problems = parse_skill(
                skill_text, path=path, source=source, directory_name=_dir_name(directory)
            )
            problems.extend(found_problems)
            if entry is None:
                continue
            if entry["name"] in found:
                logger.debug(
                    "Skill %r from %s replaces the one from %s",
                    entry["name"],
                    path,
                    found[entry["name"]]["path"],
                )
            found[entry["name"]] = entry
    return _Loaded(skills=[found[name] for name in sorted(found)], problems=problems)


def _report(problems: Iterable[str]) -> None:
    for problem in problems:
        logger.warning("%s", problem)
        warnings.warn(problem, SkillWarning, stacklevel=2)


# --------------------------------------------------------------------------- prompt


def skills_section(skills: Sequence[SkillMetadata]) -> PromptSection | None:
    """The stable `skills` prompt section listing `skills`, or `None` when there are none."""
    if not skills:
        return None
    lines = "\n".join(_skill_line(skill) for skill in skills)
    return PromptSection("skills", SKILLS_PROMPT.format(skills_list=lines), "stable")


# --------------------------------------------------------------------------- middleware


class SkillsMiddleware(SectionPromptMixin, AgentMiddleware[SkillsState, Any, Any]):
    """Loads skills from `sources` before every run and lists them in the system prompt.

    Args:
        backend: A `BackendProtocol`, or a factory `(runtime) -> BackendProtocol`, that
            holds the skill sources. Defaults to `StateBackend()` (files in the thread's
            state, filled with `invoke({"files": {...}})`). Use the backend the
            filesystem tools use, so the model can `read_file` the paths listed.
        sources: Skill source directories, lowest priority first: each subdirectory that
            holds a `SKILL.md` is a skill, and a source that holds a `SKILL.md` itself is
            one skill. Paths use forward slashes, as the backend sees them (virtual
            paths such as `/skills/`). A source that does not exist is skipped quietly.
            A `(path, label)` pair lists its skills under a `**<label> Skills**` heading.
        system_prompt: A template for the section with a `{skills_list}` slot (and, if
            wanted, `{skills_locations}`; `{skills_load_warnings}` is left empty, as
            skipped skills are reported as `SkillWarning`s); `None` adds no section.
        tools: Tools the model is offered only once it has read (with `read_file`) the
            `SKILL.md` of a skill whose front matter lists them in
            `metadata: {include_tools: [...]}`; functions become tools.

    Raises:
        TypeError: `sources` is a single string, or holds something that is not a string.
        ValueError: a source is empty or contains a backslash.

    Skills of a later source replace skills of the same name from earlier ones. The
    catalogue is kept in the private `skills_metadata` state key (written only when it
    changes) and rendered as the stable `skills` prompt section (none without skills).
    """

    state_schema = SkillsState

    def __init__(
        self,
        *,
        backend: Backend | None = None,
        sources: Sequence[str | tuple[str, str]],
        system_prompt: str | None = SKILLS_PROMPT,
        tools: Sequence[BaseTool | Callable[..., Any]] | None = None,
    ) -> None:
        super().__init__()
        if system_prompt is not None and not isinstance(system_prompt, str):
            raise TypeError(
                f"system_prompt must be str or None, not {type(system_prompt).__name__}"
            )
        if system_prompt is not None and "{skills_list}" not in system_prompt:
            raise ValueError(
                "system_prompt missing required format slot {skills_list}, where the skills "
                "go; add it, or pass None to list no skills in the prompt."
            )
        check_prompt_template(
            system_prompt, "skills_list", "the skills", "list no skills in the prompt"
        )
        self.system_prompt = system_prompt
        self.gated_tools = _gated_tools(tools)
        self.tools = list(self.gated_tools.values())
        if isinstance(sources, str | bytes):
            raise TypeError(
                f"sources must be a list of skill source paths, e.g. [{sources!r}], not a "
                "single string."
            )
        checked: list[str] = []
        self.labels: dict[str, str] = {}
        for entry in sources:
            if isinstance(entry, tuple):
                if len(entry) != 2 or not all(isinstance(part, str) for part in entry):
                    raise TypeError(
                        f"skill source {entry!r}: expected str or (str, str) tuple; a "
                        "labelled skill source is a (path, label) pair of strings."
                    )
                source, self.labels[entry[0]] = entry
            else:
                source = entry
            if not isinstance(source, str):
                raise TypeError(
                    f"skill sources must be strings (paths such as '/skills/'), not "
                    f"{type(source).__name__} {source!r}."
                )
            if not source.strip():
                raise ValueError(
                    "a skill source path is empty; give a directory such as '/skills/'."
                )
            if "\\" in source:
                raise ValueError(
                    f"skill source {source!r} contains a backslash; skill paths use forward "
                    "slashes (e.g. '/skills/project/')."
                )
            checked.append(source)
        self.backend: Backend = adopt(backend) if backend is not None else StateBackend()
        self.sources: tuple[str, ...] = tuple(checked)

    # ------------------------------------------------------------------ loading

    def load_skills(self, state: Any, runtime: Any) -> list[SkillMetadata]:
        """Read the catalogue from the sources now (warning about skills it skips)."""
        return self._load(state, runtime).skills

    async def aload_skills(self, state: Any, runtime: Any) -> list[SkillMetadata]:
        """Async `load_skills`, through the backend's async methods."""
        return (await self._aload(state, runtime)).skills

    def _load(self, state: Any, runtime: Any) -> _Loaded:
        backend = resolve_backend(self.backend, HookRuntime(state, runtime))
        loaded = drive(_load_plan(backend, self.sources), run_call)
        _report(loaded.problems)
        return loaded

    async def _aload(self, state: Any, runtime: Any) -> _Loaded:
        backend = resolve_backend(self.backend, HookRuntime(state, runtime))
        loaded = await adrive(_load_plan(backend, self.sources), arun_call)
        _report(loaded.problems)
        return loaded

    @staticmethod
    def _given_by_caller(state: Any) -> bool:
        """Whether `state` holds a catalogue no run of this middleware loaded (the caller
        put `skills_metadata` there): it is used as it is, as in the reference."""
        return (
            isinstance(state, Mapping)
            and state.get(SKILLS_STATE_KEY) is not None
            and "skills_load_errors" not in state
        )

    @staticmethod
    def _update(state: Any, loaded: _Loaded) -> dict[str, Any] | None:
        """The state update: each key when it changed (or was never written)."""
        previous = state if isinstance(state, Mapping) else {}
        update: dict[str, Any] = {}
        if SKILLS_STATE_KEY not in previous or previous[SKILLS_STATE_KEY] != loaded.skills:
            update[SKILLS_STATE_KEY] = loaded.skills
        if previous.get("skills_load_errors") != loaded.problems:
            update["skills_load_errors"] = list(loaded.problems)
        return update or None  # unchanged: no write, so the checkpoint stays small

    def before_agent(
        self,
        state: SkillsState,
        runtime: Runtime[Any] | None = None,
        config: Optional[RunnableConfig] = None,  # noqa: UP045  # the spelling LangGraph accepts
    ) -> dict[str, Any] | None:
        """Refresh the catalogue at the start of every run.

        Returns `skills_metadata` and `skills_load_errors` where they changed, `None` when
        neither did or when the caller put a catalogue in the state. `config` is accepted
        for the reference's signature.
        """
        if self._given_by_caller(state):
            return None
        return self._update(state, self._load(state, runtime))

    async def abefore_agent(
        self,
        state: SkillsState,
        runtime: Runtime[Any] | None = None,
        config: Optional[RunnableConfig] = None,  # noqa: UP045  # the spelling LangGraph accepts
    ) -> dict[str, Any] | None:
        """Async `before_agent`."""
        if self._given_by_caller(state):
            return None
        return self._update(state, await self._aload(state, runtime))

    # ------------------------------------------------------------------ prompt

    def section_for_request(self, request: ModelRequest) -> PromptSection | None:
        """The skills section built from the catalogue in this run's state."""
        state = request.state if isinstance(request.state, Mapping) else {}
        skills = state.get(SKILLS_STATE_KEY) or []
        if self.system_prompt is None:
            return None
        if self.system_prompt is SKILLS_PROMPT and not self.labels:
            return skills_section(skills)
        if not skills and self.system_prompt is SKILLS_PROMPT:
            return None  # the default lists skills only when there are some
        listing = self._labelled_list(skills) if skills else self._no_skills()
        text = (
            self.system_prompt.replace("{skills_locations}", self._locations())
            .replace("{skills_load_warnings}", "")
            .replace("{skills_list}", listing)
        )
        return PromptSection("skills", text, "stable")

    def _no_skills(self) -> str:
        """What a custom template lists when no source holds a skill (as the reference)."""
        where = " or ".join(f"`{source}`" for source in self.sources)
        return "(No skills available yet." + (
            f" You can create skills in {where})" if where else ")"
        )

    def _locations(self) -> str:
        return "\n".join(
            f"- **{self.labels[s]} Skills**: `{s}`" if s in self.labels else f"- `{s}`"
            for s in self.sources
        )

    def _labelled_list(self, skills: Sequence[SkillMetadata]) -> str:
        """The skill lines, under a `**<label> Skills**` heading per labelled source."""
        blocks: list[str] = []
        for source in self.sources:
            lines = [_skill_line(skill) for skill in skills if skill["source"] == source]
            if not lines:
                continue
            heading = [f"**{self.labels[source]} Skills**"] if source in self.labels else []
            blocks.append("\n".join([*heading, *lines]))
        return "\n\n".join(blocks)

    # ------------------------------------------------------------------ gated tools

    def _unlocked(self, request: ModelRequest) -> set[str]:
        """Gated tools named in `metadata.include_tools` of a skill the model has read."""
        state = request.state if isinstance(request.state, Mapping) else {}
        by_path = {s["path"]: s for s in state.get(SKILLS_STATE_KEY) or []}
        unlocked: set[str] = set()
        for message in request.messages:
            for call in getattr(message, "tool_calls", None) or []:
                skill = by_path.get(str(call["args"].get("file_path", "")))
                if call["name"] == "read_file" and skill is not None:
                    unlocked.update(_include_tools(skill))
        return unlocked

    def _visible(self, request: ModelRequest) -> ModelRequest:
        if not self.gated_tools:
            return request
        hidden = set(self.gated_tools) - self._unlocked(request)
        tools = [t for t in request.tools if getattr(t, "name", None) not in hidden]
        return request.override(tools=tools)

    def modify_request(self, request: ModelRequest) -> ModelRequest:
        """`request` with the skills section in its system message and only the gated
        tools a read skill unlocked (the same request when neither changes anything)."""
        return super().rewrite_model_request(self._visible(request))

    def rewrite_model_request(self, request: ModelRequest) -> ModelRequest:
        return self.modify_request(request)

    # ------------------------------------------------------------------ reference names

    @property
    def _backend(self) -> Backend:
        """The backend (or factory) as given: the reference's attribute name."""
        return self.backend

    @property
    def source_labels(self) -> list[str]:
        """Each source's label, in the order of `sources` (a source without one is labelled
        by its last path segment, capitalised, as the reference does)."""
        return [self.labels.get(source) or _default_label(source) for source in self.sources]

    @property
    def system_prompt_template(self) -> str | None:
        """`system_prompt` under the reference's name."""
        return self.system_prompt


def _default_label(source: str) -> str:
    name = source.rstrip("/").rsplit("/", 1)[-1]
    return name.capitalize() if name else "Skills"


def _skill_line(skill: SkillMetadata) -> str:
    """One catalogue line; the path is in backticks, so the `:` after it is not read as
    part of it."""
    return f"- {skill['name']} (`{skill['path']}`): {' '.join(skill['description'].split())}"


def _include_tools(skill: Mapping[str, Any]) -> list[str]:
    """The tool names a skill's `metadata: {include_tools: ...}` lists (list or spaced)."""
    metadata = skill.get("metadata") or (skill.get("extra") or {}).get("metadata") or {}
    names = metadata.get("include_tools") if isinstance(metadata, Mapping) else None
    if isinstance(names, str):
        return names.split()
    return [str(n) for n in names] if isinstance(names, list) else []


def _gated_tools(tools: Sequence[BaseTool | Callable[..., Any]] | None) -> dict[str, BaseTool]:
    """`tools=` as tools by name (functions become tools); programmer errors raise."""
    if tools is None:
        return {}
    if isinstance(tools, BaseTool) or callable(tools) or isinstance(tools, dict):
        raise TypeError("tools is a list of tools, e.g. tools=[my_tool].")
    gated: dict[str, BaseTool] = {}
    for item in tools:
        if isinstance(item, dict):
            raise TypeError("skills tools must be tools or functions, not provider tool dicts.")
        built = item if isinstance(item, BaseTool) else as_tool(item)
        if built.name in gated:
            raise ValueError(f"tools repeats the name {built.name!r}; names must be unique.")
        gated[built.name] = built
    return gated
