"""Retrieval-augmented generation as a custom workflow: rewrite → retrieve → agent.

`create_rag_workflow` builds a LangGraph `StateGraph` of three nodes in a fixed order:

```
START -> rewrite -> retrieve -> agent -> END
```

- `rewrite` makes exactly one structured-output call (`RewrittenQuery`) that turns the
  user's question into a search query, and writes `rewritten_query`. An answer that does
  not parse is not asked again: the question itself becomes the query.
- `retrieve` makes no model call: it searches the LangGraph store's index
  (`store.search(namespace, query=..., limit=k)`, semantic search over the store's
  `index={"embed": ..., "dims": ...}`) and writes at most `k` (5) `documents`, best first.
- `agent` runs an agent (a LangChain `create_agent` graph by default, with `tools`) as a
  node: it is given the documents and the original question, makes one or more model
  calls, and its final message's text is written to `answer`.

The store is the graph's own (`compile(store=...)`, or the one a LangGraph server gives
it), so the same workflow reads an in-memory index in tests and a Postgres one in
production.

```python
store = InMemoryStore(index={"embed": embed, "dims": 64})
store.put(("docs",), "wnba-1", {"text": "The Las Vegas Aces won the 2023 WNBA finals."})
rag = create_rag_workflow("openai:gpt-4.1", store=store)
rag.invoke({"question": "who won the wnba finals?"})["answer"]
```
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any, Required, TypedDict

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.tools import BaseTool
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.pregel import Pregel
from langgraph.store.base import BaseStore, SearchItem
from langgraph.types import Checkpointer
from pydantic import BaseModel, Field

from fathom.errors import FathomError, require_at_least_one
from fathom.models import resolve_model
from fathom.patterns.workflow.structured import StructuredCall, StructuredOutputError

__all__ = [
    "AGENT_NODE",
    "DEFAULT_AGENT_PROMPT",
    "DEFAULT_REWRITE_PROMPT",
    "RETRIEVE_NODE",
    "REWRITE_NODE",
    "RagInput",
    "RagState",
    "RagStoreError",
    "RewrittenQuery",
    "create_rag_workflow",
]

logger = logging.getLogger(__name__)
_NOT_A_FIELD = object()
_NO_QUERY = "the rewrite call gave no valid query (%s); searching the question itself"

REWRITE_NODE = "rewrite"
"""The node that makes the one structured rewrite call (`lc_agent_name="rewrite"`)."""
RETRIEVE_NODE = "retrieve"
"""The node that searches the store (no model call)."""
AGENT_NODE = "agent"
"""The node that runs the agent on the documents and the question."""

DEFAULT_REWRITE_PROMPT = (
    "Rewrite the user's question as a short search query for a document index: keep the "
    "names, dates and key terms, drop filler words, and do not answer the question."
)
"""The rewrite call's system prompt."""

DEFAULT_AGENT_PROMPT = (
    "Answer the user's question from the documents you are given. Say so when they do "
    "not contain the answer, rather than guessing."
)
"""The system prompt of the default agent."""


class RewrittenQuery(BaseModel):
    """The question rewritten for retrieval."""

    query: str = Field(description="The search query for the document index.")


class RagInput(TypedDict):
    """What the workflow is invoked with."""

    question: str


class RagState(TypedDict, total=False):
    """The workflow's state.

    Attributes:
        question: The user's question.
        rewritten_query: The search query `rewrite` made of it.
        documents: The texts `retrieve` found, best first (at most `k`).
        answer: The agent's answer.
    """

    question: Required[str]
    rewritten_query: str
    documents: list[str]
    answer: str


class RagStoreError(FathomError, ValueError):
    """The workflow has no store to search, or a store without an index."""


def _document(item: SearchItem, text_field: str) -> str:
    value = item.value.get(text_field)
    return value if isinstance(value, str) else json.dumps(item.value, ensure_ascii=False)


def _agent_prompt(question: str, documents: Sequence[str]) -> str:
    if not documents:
        return f"No documents were found.\n\nQuestion: {question}"
    context = "\n\n".join(f"[{i}] {doc}" for i, doc in enumerate(documents, 1))
    return f"Documents:\n{context}\n\nQuestion: {question}"


def _store() -> BaseStore:
    store = get_store()
    if store is None:
        raise RagStoreError(
            "The RAG workflow has no store to search: build it with "
            "create_rag_workflow(..., store=InMemoryStore(index={'embed': ..., 'dims': ...})) "
            "or run it where the server provides a store"
        )
    return store


def create_rag_workflow(
    model: str | BaseChatModel,
    *,
    store: BaseStore | None = None,
    namespace: tuple[str, ...] = ("docs",),
    k: int = 5,
    text_field: str = "text",
    agent: Pregel | None = None,
    tools: Sequence[BaseTool] = (),
    rewrite_model: str | BaseChatModel | None = None,
    rewrite_prompt: str = DEFAULT_REWRITE_PROMPT,
    agent_prompt: str = DEFAULT_AGENT_PROMPT,
    checkpointer: Checkpointer = None,
    name: str = "rag",
) -> CompiledStateGraph[RagState, Any, RagInput, RagState]:
    """Build the rewrite → retrieve → agent workflow as a compiled LangGraph graph.

    Invoke it with `{"question": "..."}`; the answer is in `answer`, the search query in
    `rewritten_query` and what was found in `documents`.

    Args:
        model: The agent's model, and the rewrite model unless `rewrite_model` is given.
        store: The store to search; it needs an index (`index={"embed": ..., "dims":
            ...}`). Leave it out when the graph runs where a store is provided (a
            LangGraph server).
        namespace: The namespace prefix searched.
        k: The most documents retrieved.
        text_field: The field of a stored value that holds its text (a value without it
            is given to the agent as JSON).
        agent: The agent node's agent: a compiled graph with `messages` (such as
            `create_agent(...)`); by default `create_agent(model, tools, agent_prompt)`.
        tools: The default agent's tools.
        rewrite_model: The model of the rewrite call.
        rewrite_prompt: The rewrite call's system prompt.
        agent_prompt: The default agent's system prompt.
        checkpointer: For durable threads.
        name: The graph's name.

    Raises:
        RagStoreError: `store` has no index.
        ValueError: `k` is below 1, or both `agent` and `tools` are given.
    """
    require_at_least_one("k", k)
    if agent is not None and tools:
        raise ValueError("give the agent its tools yourself: pass agent= or tools=, not both")
    if store is not None and getattr(store, "index_config", _NOT_A_FIELD) is None:
        raise RagStoreError(
            "The RAG workflow searches the store's index, and this store has none: "
            "build it with an index, e.g. InMemoryStore(index={'embed': embed, 'dims': 64})"
        )
    chat = resolve_model(model)
    rewriter = StructuredCall(
        resolve_model(rewrite_model) if rewrite_model is not None else chat,
        RewrittenQuery,
        agent_name=REWRITE_NODE,
        attempts=1,
    )
    answering = agent if agent is not None else create_agent(
        chat, tools=list(tools), system_prompt=agent_prompt, name="rag_agent"
    )

    def rewrite_messages(state: RagState) -> list[Any]:
        return [SystemMessage(content=rewrite_prompt), HumanMessage(content=state["question"])]

    def rewritten(state: RagState, answer: RewrittenQuery | None) -> dict[str, Any]:
        query = answer.query.strip() if answer is not None else ""
        return {"rewritten_query": query or state["question"]}

    def rewrite(state: RagState, config: RunnableConfig) -> dict[str, Any]:
        try:
            answer = rewriter.invoke(rewrite_messages(state), config)
        except StructuredOutputError as error:
            logger.warning(_NO_QUERY, error)
            answer = None
        return rewritten(state, answer)

    async def arewrite(state: RagState, config: RunnableConfig) -> dict[str, Any]:
        try:
            answer = await rewriter.ainvoke(rewrite_messages(state), config)
        except StructuredOutputError as error:
            logger.warning(_NO_QUERY, error)
            answer = None
        return rewritten(state, answer)

    def query(state: RagState) -> str:
        return state.get("rewritten_query") or state["question"]

    def retrieve(state: RagState) -> dict[str, Any]:
        items = _store().search(namespace, query=query(state), limit=k)
        return {"documents": [_document(item, text_field) for item in items[:k]]}

    async def aretrieve(state: RagState) -> dict[str, Any]:
        items = await _store().asearch(namespace, query=query(state), limit=k)
        return {"documents": [_document(item, text_field) for item in items[:k]]}

    def agent_input(state: RagState) -> Any:  # the agent's own input type
        prompt = _agent_prompt(state["question"], state.get("documents") or [])
        return {"messages": [HumanMessage(content=prompt)]}

    def answered(output: Any) -> dict[str, Any]:
        messages = (output.get("messages") or []) if isinstance(output, dict) else []
        return {"answer": str(messages[-1].text) if messages else ""}

    def run_agent(state: RagState, config: RunnableConfig) -> dict[str, Any]:
        return answered(answering.invoke(agent_input(state), config))

    async def arun_agent(state: RagState, config: RunnableConfig) -> dict[str, Any]:
        return answered(await answering.ainvoke(agent_input(state), config))

    graph = StateGraph(RagState, input_schema=RagInput)
    graph.add_node(REWRITE_NODE, RunnableLambda(rewrite, afunc=arewrite, name=REWRITE_NODE))
    graph.add_node(RETRIEVE_NODE, RunnableLambda(retrieve, afunc=aretrieve, name=RETRIEVE_NODE))
    graph.add_node(AGENT_NODE, RunnableLambda(run_agent, afunc=arun_agent, name=AGENT_NODE))
    graph.add_edge(START, REWRITE_NODE)
    graph.add_edge(REWRITE_NODE, RETRIEVE_NODE)
    graph.add_edge(RETRIEVE_NODE, AGENT_NODE)
    graph.add_edge(AGENT_NODE, END)
    return graph.compile(checkpointer=checkpointer, store=store, name=name)
