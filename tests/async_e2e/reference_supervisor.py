"""The reference package's own supervisor, driving children on another server by `url`.

Run in the reference's virtualenv (`benchmarks/.venv-deepagents`) with `PYTHONPATH=src`
(for `fathom.testing`'s `ScriptedModel`), by `tests/test_async_interop_reference.py`:

    reference_supervisor.py CHILD_URL

`deepagents.create_deep_agent` builds the supervisor with the reference's
`AsyncSubAgentMiddleware` (specs `researcher`, interrupt, and `coder`, enqueue, both with
`url=CHILD_URL`) and the same scripted model as `deploy/graphs.py`'s supervisor. It runs
the same flow as `flow.py` in process, releasing the gates under `FATHOM_E2E_GATES`
itself, and prints one JSON object: each command's tool answers, the polls it needed, and
the final `async_tasks`.
"""

import asyncio
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from deepagents import create_deep_agent  # pyright: ignore[reportMissingImports]
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from fathom.testing import ScriptedModel

DEADLINE_S = 60.0
"""Bounds a hang while polling; conditions normally hold within a second."""
HERE = Path(__file__).resolve().parent


def _supervise_policy() -> Any:
    """The deploy's scripted supervisor policy, loaded by path (no fathom agent is used)."""
    spec = importlib.util.spec_from_file_location("e2e_graphs", HERE / "deploy" / "graphs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module._supervise


async def poll(condition: Any, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not await condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


class Gates:
    def __init__(self) -> None:
        self.root = Path(os.environ["FATHOM_E2E_GATES"])

    async def started(self, *names: str) -> None:
        async def reached() -> bool:
            return all((self.root / name / "started").exists() for name in names)

        await poll(reached, f"gates {names}")

    def release(self, name: str) -> None:
        (self.root / name).mkdir(parents=True, exist_ok=True)
        (self.root / name / "release").touch()


async def main(child_url: str) -> dict[str, Any]:
    agent = create_deep_agent(
        model=ScriptedModel(policy=_supervise_policy()),
        system_prompt="You are the scripted supervisor.",
        subagents=[
            {"name": "researcher", "description": "Researches a topic in depth.",
             "graph_id": "researcher", "url": child_url},
            {"name": "coder", "description": "Writes code for a task.", "graph_id": "coder",
             "url": child_url, "update_strategy": "enqueue"},
        ],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "reference-supervisor"}}
    gates = Gates()
    log: dict[str, Any] = {}

    async def turn(text: str) -> list[str]:
        state = await agent.ainvoke({"messages": [{"role": "user", "content": text}]}, config)
        messages = state["messages"]
        asked = max(i for i, m in enumerate(messages) if m.type == "human" and m.text == text)
        answers = [str(m.content) for m in messages[asked:] if isinstance(m, ToolMessage)]
        log.setdefault(text.split()[0], []).append(answers)
        return answers

    async def tasks() -> dict[str, Any]:
        return dict((await agent.aget_state(config)).values.get("async_tasks") or {})

    researcher, coder = (a.split("task_id: ")[1] for a in await turn(
        "start researcher:alpha coder:beta"))  # fmt: skip
    log["ids"] = {"researcher": researcher, "coder": coder}
    await gates.started("alpha", "beta")
    state = await agent.ainvoke({"messages": [{"role": "user", "content": "say hello"}]}, config)
    log["reply"] = state["messages"][-1].text
    log["tasks_while_running"] = await tasks()
    await turn(f"check {researcher} {coder}")
    await turn(f"update {researcher} alpha-more")
    await gates.started("alpha-more")
    log["researcher_runs"] = [log["tasks_while_running"][researcher]["run_id"],
                              (await tasks())[researcher]["run_id"]]  # fmt: skip
    await turn(f"update {coder} beta-more")
    log["coder_after_update"] = (await tasks())[coder]
    gates.release("beta")
    await gates.started("beta-more")
    await turn(f"check {coder}")
    await turn(f"cancel {coder}")
    await turn(f"check {coder}")
    gates.release("alpha-more")

    async def finished() -> bool:
        [answer] = await turn(f"check {researcher}")
        return json.loads(answer)["status"] == "success"

    await poll(finished, "the researcher to finish")
    await turn("list")
    log["tasks"] = await tasks()
    return log


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1]))))
