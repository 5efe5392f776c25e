"""Router: classify a query, fan it out to the chosen experts in parallel, merge one answer.

`create_router` builds a LangGraph `StateGraph` with a `classify` node, one node per expert
and a `synthesize` node:

```
START -> classify --Send(expert, {"query": sub_question}) per classification--> experts
      -> synthesize -> END
```

The classifier makes one structured-output call whose `source` field is constrained to the
expert names, so it can pick zero or more experts and write a sub-question for each. Only
the chosen experts run, concurrently; their results are collected in classification order;
synthesis costs a model call only when two or more experts answered. The workflow keeps no
memory between invocations: give it to a conversational agent with `router_tool` for that.

```python
workflow = create_router(
    "openai:gpt-4.1-mini",
    [
        Expert("github", "Code, API references and implementation details.", github_agent),
        Expert("notion", "Internal documentation, processes and policies.", notion_agent),
    ],
)
workflow.invoke({"query": "How do I authenticate API requests?"})["final_answer"]
```
"""

from __future__ import annotations

import asyncio
import inspect
import operator
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Required, TypedDict, cast

from langchain_core.language_models import BaseChatModel, BaseLanguageModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.runnables.config import merge_configs
from langchain_core.tools import BaseTool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Checkpointer, Command, Overwrite, Send
from pydantic import BaseModel, Field, create_model

from fathom.errors import FathomError, wrong_type
from fathom.models import resolve_model
from fathom.tool_answers import tool_of

__all__ = [
    "CLASSIFY_NODE",
    "DEFAULT_SYNTHESIS_PROMPT",
    "DEFAULT_TOOL_DESCRIPTION",
    "NO_RESULTS_ANSWER",
    "SYNTHESIZER_NAME",
    "SYNTHESIZE_NODE",
    "Classification",
    "Expert",
    "ExpertInput",
    "ExpertResult",
    "RouterClassificationError",
    "RouterInput",
    "RouterState",
    "build_classification_schema",
    "create_router",
    "router_tool",
]

CLASSIFY_NODE = "classify"
"""The node that makes the classification call."""
SYNTHESIZE_NODE = "synthesize"
"""The node that merges the experts' results into `final_answer`."""
SYNTHESIZER_NAME = "synthesizer"
"""The `lc_agent_name` the synthesis call is attributed to."""
NO_RESULTS_ANSWER = "No results found from any knowledge source."
"""`final_answer` when no expert was chosen or none of them answered."""

DEFAULT_SYNTHESIS_PROMPT = (
    'Several knowledge sources answered parts of this question: "{query}"\n\n'
    "Write one answer to the question from their results:\n"
    "- merge what they say without repeating it;\n"
    "- put the most relevant, actionable information first;\n"
    "- say so where the sources disagree;\n"
    "- be concise and well organised."
)
"""The synthesizer's system prompt; `{query}` is replaced by the original question."""

DEFAULT_TOOL_DESCRIPTION = (
    "Search across the organisation's knowledge sources and return one combined answer. "
    "Pass a standalone question: the search does not see this conversation."
)
"""The default description of the tool `router_tool` makes."""

_NAME_PATTERN = re.compile(r"[A-Za-z0-9_-]+")
# Node names of the graph and keys of its state; an expert may not take any of them.
_RESERVED_NAMES = frozenset(
    {CLASSIFY_NODE, SYNTHESIZE_NODE, START, END, "query", "classifications", "results",
     "final_answer"}
)

ExpertAgent = Runnable[Any, Any] | Callable[[str], Any]
"""A compiled agent (any runnable taking `{"messages": [...]}`) or a function `query -> str`."""


# --------------------------------------------------------------------------- state


class Classification(TypedDict):
    """One routing decision: ask expert `source` the sub-question `query`."""

    source: str
    query: str


class ExpertResult(TypedDict):
    """What one expert answered."""

    source: str
    result: str


class ExpertInput(TypedDict):
    """The payload each expert node receives: exactly the (sub-)question."""

    query: str


class RouterInput(TypedDict):
    """The router's input."""

    query: str


class RouterState(TypedDict, total=False):
    """The router's state and output.

    Attributes:
        query: The original question.
        classifications: The experts chosen and their sub-questions, in the classifier's order.
        results: One entry per expert run, in classification order (parallel writes are
            concatenated by the reducer; `classify` clears it at the start of every run).
        final_answer: The merged answer.
    """

    query: Required[str]
    classifications: list[Classification]
    results: Annotated[list[ExpertResult], operator.add]
    final_answer: str


class RouterClassificationError(FathomError, ValueError):
    """The classifier's answer did not fit the classification schema."""


# --------------------------------------------------------------------------- experts


@dataclass(frozen=True)
class Expert:
    """A specialist the router can send a question to.

    Attributes:
        name: The graph node name and the value the classifier picks (letters, digits, `_`
            and `-`).
        description: What the expert knows; shown to the classifier in the default prompt.
        agent: A compiled agent, invoked with one user message (its answer is the last AI
            message with text), or a function `query -> str` (sync or async).
        title: How the expert is named to the synthesizer; defaults to `name.title()`.
    """

    name: str
    description: str
    agent: ExpertAgent
    title: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME_PATTERN.fullmatch(self.name):
            raise ValueError(
                f"Expert name {self.name!r} is not usable: use letters, digits, '_' and '-' "
                "only (it becomes a graph node name and a value the classifier picks)."
            )
        if self.name in _RESERVED_NAMES:
            raise ValueError(
                f"Expert name {self.name!r} is taken by the router's own graph; pick a name "
                f"other than {sorted(_RESERVED_NAMES)}."
            )
        if not isinstance(self.description, str) or not self.description.strip():
            raise ValueError(
                f"Expert {self.name!r} needs a description: the classifier chooses experts "
                "by it."
            )
        if isinstance(self.agent, BaseLanguageModel):
            raise TypeError(
                f"Expert {self.name!r} is a bare model. Wrap it in an agent, e.g. "
                "create_agent(model, tools=[...], system_prompt=...), or pass a function "
                "query -> str."
            )
        if not isinstance(self.agent, Runnable) and not callable(self.agent):
            raise wrong_type(f"Expert {self.name!r}: agent", self.agent,
                             "a compiled agent or a function query -> str.")

    @property
    def label(self) -> str:
        """The name shown to the synthesizer."""
        return self.title or self.name.title()


def _last_ai_text(output: Any, expert: str) -> str:
    messages = output.get("messages") if isinstance(output, dict) else None
    if not isinstance(messages, list):
        raise TypeError(
            f"Expert {expert!r} returned a {type(output).__name__} without a 'messages' list; "
            "an agent expert must return its state (as create_agent's graphs do)."
        )
    for message in reversed(messages):
        if isinstance(message, AIMessage) and message.text.strip():
            return message.text
    return ""


def _checked_text(value: Any, expert: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"Expert {expert!r} returned a {type(value).__name__}; expected a str.")
    return value


def _agent_input(query: str) -> dict[str, list[BaseMessage]]:
    return {"messages": [HumanMessage(query)]}


def _attributed(config: RunnableConfig, name: str) -> RunnableConfig:
    # Metadata is merged, not replaced, so thread ids and LangGraph's own keys survive.
    return merge_configs(config, {"metadata": {"lc_agent_name": name}})


# --------------------------------------------------------------------------- schema


def build_classification_schema(
    names: Sequence[str], *, single: bool = False
) -> type[BaseModel]:
    """Build the classifier's structured-output schema with `source` limited to `names`.

    Args:
        names: The expert names the classifier may pick.
        single: Build the single-target schema (`RouteDecision` with one `source`) instead
            of `ClassificationResult` (a list of `{source, query}`).

    Returns:
        A pydantic model; its class name is the tool name a tool-calling model answers with.
    """
    if not names:
        raise ValueError("A classification schema needs at least one source name.")
    source_type: Any = Literal[tuple(names)]
    source_help = f"The knowledge source to ask; one of: {', '.join(names)}."
    if single:
        return create_model(
            "RouteDecision",
            __doc__="The one knowledge source that should answer the question.",
            source=(source_type, Field(description=source_help)),
        )
    item = create_model(
        "Classification",
        __doc__="A knowledge source to ask, with a question tailored to it.",
        source=(source_type, Field(description=source_help)),
        query=(str, Field(description="The sub-question to ask this source.")),
    )
    # `item` exists only at run time, so the field type is built as a value.
    fields: dict[str, Any] = {
        "classifications": (
            list[item],
            Field(description="One entry per relevant source; empty if none fits."),
        ),
    }
    return create_model(
        "ClassificationResult",
        __doc__="The knowledge sources relevant to the question (possibly none).",
        **fields,
    )


def _default_routing_prompt(experts: Sequence[Expert], *, single: bool) -> str:
    sources = "\n".join(f"- {e.name}: {e.description}" for e in experts)
    if single:
        task = "Pick the one knowledge source best suited to answer the user's question."
    else:
        task = (
            "Decide which knowledge sources can help answer the user's question. Choose only "
            "sources that are relevant (possibly none), and for each one write a sub-question "
            "tailored to what that source holds."
        )
    return f"{task}\n\nAvailable sources:\n{sources}"


# --------------------------------------------------------------------------- the router


class _Router:
    """The node functions of one router graph; nothing here changes after construction."""

    def __init__(
        self,
        classifier: BaseChatModel,
        synthesizer: BaseChatModel,
        experts: Sequence[Expert],
        *,
        routing_prompt: str,
        synthesis_prompt: str,
        single: bool,
        name: str,
    ) -> None:
        self.experts = {e.name: e for e in experts}
        self.schema = build_classification_schema(list(self.experts), single=single)
        # with `include_raw=True` the answer is always the dict {raw, parsed, parsing_error}
        self.structured = cast(
            "Runnable[Any, dict[str, Any]]",
            classifier.with_structured_output(self.schema, include_raw=True),
        )
        self.synthesizer = synthesizer
        self.routing_prompt = routing_prompt
        self.synthesis_prompt = synthesis_prompt
        self.single = single
        self.name = name

    # ---------------------------------------------------------------- classify

    def _classifier_call(
        self, state: RouterState, config: RunnableConfig
    ) -> tuple[list[BaseMessage], RunnableConfig]:
        query = state.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ValueError(
                "The router needs a non-empty 'query' string, e.g. "
                "workflow.invoke({'query': 'How do I authenticate API requests?'})."
            )
        messages = [SystemMessage(self.routing_prompt), HumanMessage(query)]
        return messages, _attributed(config, self.name)

    def _parse(self, output: dict[str, Any]) -> BaseModel:
        error = output.get("parsing_error")
        allowed = ", ".join(self.experts)
        if error is not None:
            raise RouterClassificationError(
                f"The classifier's answer does not fit {self.schema.__name__} "
                f"(sources must be one of: {allowed}): {error}"
            ) from error
        parsed = output.get("parsed")
        if not isinstance(parsed, self.schema):
            raw = output.get("raw")
            shown = raw.text if isinstance(raw, AIMessage) else repr(raw)
            raise RouterClassificationError(
                f"The classifier gave no {self.schema.__name__} (expected structured output "
                f"choosing among: {allowed}); it answered: {shown[:200]!r}"
            )
        return parsed

    def _decide(self, state: RouterState, output: dict[str, Any]) -> dict[str, Any] | Command[str]:
        parsed, query = self._parse(output), state["query"]
        if self.single:
            # the schema is built at run time (`build_classification_schema`)
            source = str(parsed.source)  # pyright: ignore[reportAttributeAccessIssue]
            chosen = [Classification(source=source, query=query)]
            return Command(
                goto=source, update={"classifications": chosen, "results": Overwrite([])}
            )
        # An empty sub-question would leave the expert nothing to answer: ask the original.
        chosen = [
            Classification(source=str(c.source), query=c.query.strip() or query)
            for c in parsed.classifications  # pyright: ignore[reportAttributeAccessIssue]
        ]
        return {"classifications": chosen, "results": Overwrite([])}

    def classify(self, state: RouterState, config: RunnableConfig) -> Any:
        return self._decide(state, self.structured.invoke(*self._classifier_call(state, config)))

    async def aclassify(self, state: RouterState, config: RunnableConfig) -> Any:
        output = await self.structured.ainvoke(*self._classifier_call(state, config))
        return self._decide(state, output)

    @staticmethod
    def route(state: RouterState) -> list[Send] | str:
        """One `Send` per classification, carrying only the sub-question."""
        chosen = state.get("classifications") or []
        if not chosen:
            return SYNTHESIZE_NODE
        return [Send(c["source"], {"query": c["query"]}) for c in chosen]

    # ---------------------------------------------------------------- experts

    def expert_node(self, expert: Expert) -> RunnableLambda[ExpertInput, dict[str, Any]]:
        agent = expert.agent

        def run(payload: ExpertInput, config: RunnableConfig) -> dict[str, Any]:
            query = payload["query"]
            if isinstance(agent, Runnable):
                output = agent.invoke(_agent_input(query), _attributed(config, expert.name))
                text = _last_ai_text(output, expert.name)
            else:
                if inspect.iscoroutinefunction(agent):
                    raise TypeError(
                        f"Expert {expert.name!r} is an async function; run the router with "
                        "ainvoke() or astream()."
                    )
                text = _checked_text(agent(query), expert.name)
            return {"results": [ExpertResult(source=expert.name, result=text)]}

        async def arun(payload: ExpertInput, config: RunnableConfig) -> dict[str, Any]:
            query = payload["query"]
            if isinstance(agent, Runnable):
                output = await agent.ainvoke(
                    _agent_input(query), _attributed(config, expert.name)
                )
                text = _last_ai_text(output, expert.name)
            elif inspect.iscoroutinefunction(agent):
                text = _checked_text(await agent(query), expert.name)
            else:
                # A blocking function must not stall the other experts on the event loop.
                text = _checked_text(await asyncio.to_thread(agent, query), expert.name)
            return {"results": [ExpertResult(source=expert.name, result=text)]}

        return RunnableLambda(run, afunc=arun, name=expert.name)

    # ---------------------------------------------------------------- synthesize

    def _answered(self, state: RouterState) -> list[ExpertResult]:
        return [r for r in state.get("results") or [] if r["result"].strip()]

    def _synthesis_call(
        self, state: RouterState, answered: list[ExpertResult], config: RunnableConfig
    ) -> tuple[list[Any], RunnableConfig]:
        blocks = [
            f"**From {self.experts[r['source']].label}:**\n{r['result']}" for r in answered
        ]
        system = self.synthesis_prompt.replace("{query}", state["query"])
        messages = [SystemMessage(system), HumanMessage("\n\n".join(blocks))]
        return messages, _attributed(config, SYNTHESIZER_NAME)

    @staticmethod
    def _without_model(answered: list[ExpertResult]) -> dict[str, str] | None:
        if not answered:
            return {"final_answer": NO_RESULTS_ANSWER}
        if len(answered) == 1:
            return {"final_answer": answered[0]["result"]}
        return None

    def synthesize(self, state: RouterState, config: RunnableConfig) -> dict[str, str]:
        answered = self._answered(state)
        if (done := self._without_model(answered)) is not None:
            return done
        response = self.synthesizer.invoke(*self._synthesis_call(state, answered, config))
        return {"final_answer": response.text}

    async def asynthesize(self, state: RouterState, config: RunnableConfig) -> dict[str, str]:
        answered = self._answered(state)
        if (done := self._without_model(answered)) is not None:
            return done
        response = await self.synthesizer.ainvoke(*self._synthesis_call(state, answered, config))
        return {"final_answer": response.text}


def create_router(
    classifier_model: BaseChatModel | str,
    experts: Sequence[Expert],
    *,
    synthesizer_model: BaseChatModel | str | None = None,
    routing_prompt: str | None = None,
    synthesis_prompt: str = DEFAULT_SYNTHESIS_PROMPT,
    mode: Literal["parallel", "single"] = "parallel",
    name: str = "router",
    checkpointer: Checkpointer = None,
) -> CompiledStateGraph[RouterState, None, RouterInput, RouterState]:
    """Build a router workflow: classify, run the chosen experts in parallel, synthesize.

    Args:
        classifier_model: The model that classifies the query (a chat model or a
            `"provider:model"` string). It must support `with_structured_output`.
        experts: The experts to route to, in the order the classifier sees them.
        synthesizer_model: The model that merges two or more results; defaults to
            `classifier_model`.
        routing_prompt: The classifier's system prompt. Defaults to one that lists every
            expert's name and description. The schema limits `source` to the expert names
            either way.
        synthesis_prompt: The synthesizer's system prompt; must contain `{query}`, which is
            replaced by the original question. The results follow in one user message, each
            as `**From <Title>:**` and the expert's answer.
        mode: `"parallel"` (default): the classifier picks zero or more experts, each with a
            tailored sub-question, and each runs through `Send(name, {"query": ...})`.
            `"single"`: it picks exactly one expert, reached with `Command(goto=name)`, which
            is asked the original question.
        name: The graph's name, and the `lc_agent_name` the classification call is
            attributed to (experts' calls carry the expert's name, synthesis `"synthesizer"`).
        checkpointer: Passed to `compile`. The workflow is stateless by default; with a
            checkpointer each invocation still starts from a clean slate of results.

    Returns:
        The compiled graph. Invoke it with `{"query": ...}`; the output holds `query`,
        `classifications`, `results` and `final_answer`.

    Raises:
        ValueError: No experts, duplicate expert names, an unknown `mode`, or a
            `synthesis_prompt` without `{query}`.
        TypeError: An entry of `experts` is not an `Expert`.
    """
    if mode not in ("parallel", "single"):
        raise ValueError(f"mode must be 'parallel' or 'single', not {mode!r}.")
    experts = list(experts)
    if not experts:
        raise ValueError("create_router needs at least one Expert to route to.")
    for position, expert in enumerate(experts):
        if not isinstance(expert, Expert):
            raise wrong_type(f"experts[{position}]", expert, "Expert(name, description, agent).")
    names = [e.name for e in experts]
    if duplicates := sorted({n for n in names if names.count(n) > 1}):
        raise ValueError(f"Expert names must be unique; repeated: {duplicates}.")
    if "{query}" not in synthesis_prompt:
        raise ValueError("synthesis_prompt must contain '{query}' (the original question).")
    if not isinstance(name, str) or not name.strip():
        raise ValueError("name must be a non-empty string.")

    single = mode == "single"
    classifier = resolve_model(classifier_model)
    router = _Router(
        classifier,
        resolve_model(synthesizer_model) if synthesizer_model is not None else classifier,
        experts,
        routing_prompt=routing_prompt or _default_routing_prompt(experts, single=single),
        synthesis_prompt=synthesis_prompt,
        single=single,
        name=name,
    )

    graph = StateGraph(RouterState, input_schema=RouterInput, output_schema=RouterState)
    graph.add_node(
        CLASSIFY_NODE,
        RunnableLambda(router.classify, afunc=router.aclassify, name=CLASSIFY_NODE),
        destinations=tuple(names) if single else None,
    )
    for expert in experts:
        graph.add_node(expert.name, router.expert_node(expert), input_schema=ExpertInput)
        graph.add_edge(expert.name, SYNTHESIZE_NODE)
    graph.add_node(
        SYNTHESIZE_NODE,
        RunnableLambda(router.synthesize, afunc=router.asynthesize, name=SYNTHESIZE_NODE),
    )
    graph.add_edge(START, CLASSIFY_NODE)
    if not single:
        # With Send the path list decides nothing; it names the possible targets for drawing.
        graph.add_conditional_edges(CLASSIFY_NODE, router.route, [*names, SYNTHESIZE_NODE])
    graph.add_edge(SYNTHESIZE_NODE, END)
    return graph.compile(checkpointer=checkpointer, name=name)


# --------------------------------------------------------------------------- as a tool


class _SearchArgs(BaseModel):
    query: str = Field(description="A standalone question to search the knowledge sources for.")


def router_tool(
    workflow: Runnable[Any, Any],
    *,
    name: str = "search_knowledge_base",
    description: str = DEFAULT_TOOL_DESCRIPTION,
) -> BaseTool:
    """Wrap a router workflow as a tool for a conversational agent.

    The agent (with its own checkpointer) holds the conversation; each tool call runs the
    stateless workflow once on `{"query": query}` and returns its `final_answer`.

    Args:
        workflow: A graph built by `create_router` (anything returning `final_answer`).
        name: The tool's name.
        description: The tool's description, which is what the agent decides by.

    Returns:
        A tool with one argument, `query`, that works with `invoke` and `ainvoke`.
    """
    if not isinstance(workflow, Runnable):
        raise wrong_type("workflow", workflow, "the graph create_router returns.")
    if not isinstance(name, str) or not _NAME_PATTERN.fullmatch(name):
        raise ValueError(f"Tool name {name!r} is not usable: use letters, digits, '_' and '-'.")

    def search(query: str, config: RunnableConfig) -> str:
        return str(workflow.invoke({"query": query}, config)["final_answer"])

    async def asearch(query: str, config: RunnableConfig) -> str:
        return str((await workflow.ainvoke({"query": query}, config))["final_answer"])

    return tool_of(name, description, _SearchArgs, search, asearch)
