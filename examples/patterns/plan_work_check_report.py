"""Plan → work → check → report: campaign picks with compliant promo copy.

The custom-workflow pattern (a LangGraph graph of your own) on a marketing-campaign request
with dependent tasks. The request asks for spring-sale recommendations and promo copy for
a user but does not say which user, so:

1. the planner asks (an interrupt) and the run resumes with the answer;
2. round 1 runs in two waves: campaign rules and product recall in parallel, then the
   copy, which depends on both and is given their results;
3. the checker rejects the copy ("guaranteed lowest price" breaks the campaign rules);
4. round 2 is an incremental re-plan: only the copy is redone, the rules and products
   are kept; the check passes and the reporter answers.

Progress is printed from the workflow's custom stream events as they arrive.

Offline, every model is a `ScriptedModel` whose policy decides from what it is sent; with
`--model provider:model` every role uses that model through `init_chat_model`.

Run: `.venv/bin/python examples/patterns/plan_work_check_report.py [--model openai:gpt-4.1]`
"""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

from langchain.agents import create_agent
from langchain.chat_models import init_chat_model
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.types import Command

from fathom.patterns.workflow import (
    CHECKPOINT_TYPES,
    Action,
    ActionRegistry,
    create_plan_work_check_report,
)
from fathom.testing import ScriptedModel, ScriptRequest, ai, tool_call
from fathom.usage import AgentUsage

REQUEST = "Recommend spring-sale products to one of our users and write promo copy for them."
USER_ANSWER = "The user is u-1842."

# --------------------------------------------------------------------------- the shop

RULES = {
    "spring-sale": (
        "Spring Sale, 1-15 April: 20% off apparel and bags. Copy must state the discount "
        "exactly and must not make absolute claims such as 'guaranteed', 'lowest price' or "
        "'best ever'."
    )
}
PICKS = {
    "u-1842": "Linen Shirt (A-113, ¥199 -> ¥159); Canvas Tote (B-207, ¥129 -> ¥103)",
}


def get_campaign_rules(campaign: str) -> str:
    """Look up the rules of a marketing campaign."""
    return RULES.get(campaign, f"No campaign called {campaign!r}.")


def recall_products(user_id: str, campaign: str) -> str:
    """Recall the campaign products that fit a user's purchase history."""
    return PICKS.get(user_id, f"No history for user {user_id!r}.")


ACTIONS = ActionRegistry(
    [
        Action(
            name="query_campaign_rules",
            description="Look up what a campaign offers and what its copy may say.",
            agents=("rules",),
            produces=("rules",),
        ),
        Action(
            name="recall_products",
            description="Pick campaign products for a user from their history.",
            agents=("recommender",),
            produces=("products",),
        ),
        Action(
            name="generate_copy",
            description="Write promo copy for the picked products that follows the rules.",
            agents=("copywriter",),
            requires=("rules", "products"),
            produces=("copy",),
        ),
    ]
)

# --------------------------------------------------------------------------- scripted roles


def _field(text: str, name: str) -> str:
    found = re.search(rf'"{name}": "([^"]*)"', text)
    return found.group(1) if found else ""


def planner_policy(request: ScriptRequest) -> AIMessage:
    """Ask for the user if unknown; plan rules + products, then copy; on a re-plan, redo copy."""
    text = request.last_human_text
    user = re.search(r"\bu-\d+", text)
    if user is None:
        question = "Which user should I recommend products for (their user id)?"
        return ai("", tool_call("Plan", {"intent": "clarify", "question": question}))
    base = {"campaign": "spring-sale", "user_id": user.group(0)}
    copy_task = {
        "id": "copy",
        "agent": "copywriter",
        "action": "generate_copy",
        "inputs": {**base, "tone": "warm"},
        "depends_on": ["rules", "products"],
        "success_criteria": "Names every picked product and follows the campaign rules.",
    }
    if "The checker rejected" in text:
        redo = {
            **copy_task,
            "id": "copy-v2",
            "inputs": {**copy_task["inputs"], "avoid": "absolute claims"},
        }
        plan = {"intent": "work", "reasoning": "Only the copy failed; rewrite it.", "tasks": [redo]}
        return ai("", tool_call("Plan", plan))
    tasks = [
        {
            "id": "rules",
            "agent": "rules",
            "action": "query_campaign_rules",
            "inputs": {"campaign": "spring-sale"},
            "success_criteria": "The campaign's discount and copy rules.",
        },
        {
            "id": "products",
            "agent": "recommender",
            "action": "recall_products",
            "inputs": base,
            "success_criteria": "At least one product with its sale price.",
        },
        copy_task,
    ]
    reasoning = "Rules and products are independent; the copy needs both."
    return ai("", tool_call("Plan", {"intent": "work", "reasoning": reasoning, "tasks": tasks}))


def rules_policy(request: ScriptRequest) -> AIMessage | str:
    """Look the campaign up, then answer with what the tool said."""
    if not request.tool_results:
        campaign = _field(request.last_human_text, "campaign")
        return ai("", tool_call("get_campaign_rules", {"campaign": campaign}))
    return str(request.tool_results[-1].text)


def recommender_policy(request: ScriptRequest) -> AIMessage | str:
    """Recall products for the user in the task's inputs, then list them."""
    if not request.tool_results:
        text = request.last_human_text
        args = {"user_id": _field(text, "user_id"), "campaign": _field(text, "campaign")}
        return ai("", tool_call("recall_products", args))
    return f"Picks: {request.tool_results[-1].text}"


def copywriter_policy(request: ScriptRequest) -> str:
    """Write copy for the products it was given; careful only when told what to avoid."""
    text = request.last_human_text
    products = re.findall(r"(Linen Shirt|Canvas Tote)", text)
    names = " and the ".join(dict.fromkeys(products))
    if '"avoid"' in text:
        return f"Spring is here: the {names} are 20% off for you until 15 April."
    return f"Guaranteed lowest price! Grab the {names} now."


def checker_policy(request: ScriptRequest) -> AIMessage:
    """Fail copy that makes absolute claims; pass otherwise."""
    text = request.last_human_text
    for task_id, output in re.findall(r"\[(\S+)\] generate_copy by \S+: ok.*\n  (.*)", text):
        if re.search(r"guaranteed|lowest price", output, re.IGNORECASE):
            verdict = {
                "passed": False,
                "feedback": "The copy claims a 'guaranteed lowest price'; the rules forbid "
                "absolute claims. Rewrite it without them.",
                "failed_task_ids": [task_id],
            }
            return ai("", tool_call("CheckVerdict", verdict))
    return ai("", tool_call("CheckVerdict", {"passed": True}))


def reporter_policy(request: ScriptRequest) -> str:
    """Answer from the results the reporter was given."""
    text = request.last_human_text
    picks = re.search(r"Picks: (.*)", text)
    copy = re.search(r"generate_copy by \S+: ok.*\n  (.*)", text)
    user = re.search(r"\bu-\d+", text)
    return (
        f"Spring-sale picks for {user.group(0) if user else 'the user'}: "
        f"{picks.group(1) if picks else 'none'}\n"
        f"Promo copy: {copy.group(1) if copy else '(none)'}"
    )


# --------------------------------------------------------------------------- wiring


def build(model: BaseChatModel | None = None) -> Any:
    """The workflow, with scripted roles when `model` is None."""

    def role(policy: Any) -> BaseChatModel:
        return model if model is not None else ScriptedModel(policy=policy)

    workers = {
        "rules": create_agent(
            role(rules_policy),
            tools=[get_campaign_rules],
            system_prompt="You look up campaign rules with your tool and report them exactly.",
            name="rules",
        ),
        "recommender": create_agent(
            role(recommender_policy),
            tools=[recall_products],
            system_prompt="You recall campaign products for a user with your tool.",
            name="recommender",
        ),
        "copywriter": role(copywriter_policy),
    }
    return create_plan_work_check_report(
        role(planner_policy),
        workers,
        role(checker_policy),
        role(reporter_policy),
        actions=ACTIONS,
        max_rounds=3,
        # The workflow keeps typed results in its state; allow their types explicitly.
        checkpointer=InMemorySaver(
            serde=JsonPlusSerializer(allowed_msgpack_modules=CHECKPOINT_TYPES)
        ),
    )


def _line(event: dict[str, Any]) -> str:
    data = event["data"]
    extra = ""
    if event["event"] == "plan_done" and data["waves"]:
        extra = f" waves={data['waves']}"
    elif event["event"].startswith("work_tool"):
        extra = f" (task {data['task_id']})"
    return f"[{event['event']}] {event['msg']}{extra}"


def main(model: BaseChatModel | None = None) -> dict[str, Any]:
    """Run the request to the end (answering the planner's question); return a summary."""
    workflow = build(model)
    usage = AgentUsage()
    config: dict[str, Any] = {"configurable": {"thread_id": "campaign-1"}, "callbacks": [usage]}
    events: list[dict[str, Any]] = []
    inputs: Any = {"request": REQUEST}
    print(f"request: {REQUEST}")
    while True:
        question = None
        for mode, chunk in workflow.stream(inputs, config, stream_mode=["custom", "updates"]):
            if mode == "custom":
                events.append(chunk)
                print(_line(chunk))
            elif "__interrupt__" in chunk:
                question = chunk["__interrupt__"][0].value["question"]
        if question is None:
            break
        print(f"planner asks: {question}\nuser answers: {USER_ANSWER}")
        inputs = Command(resume=USER_ANSWER)

    state = workflow.get_state(config).values
    print(f"\nstatus: {state['status']} after {state['round']} round(s)")
    print("results: " + json.dumps({k: r.status for k, r in state["results"].items()}))
    print(f"report:\n{state['report']}")
    calls = {name: totals.calls for name, totals in sorted(usage.totals().items())}
    print(f"model calls: {calls}")
    return {
        "status": state["status"],
        "rounds": state["round"],
        "report": state["report"],
        "results": {k: r.model_dump() for k, r in state["results"].items()},
        "events": [e["event"] for e in events],
        "waves": [e["data"]["waves"] for e in events if e["event"] == "plan_done"],
        "model_calls": calls,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="provider:model for every role (default: scripted)")
    arguments = parser.parse_args()
    main(init_chat_model(arguments.model) if arguments.model else None)
