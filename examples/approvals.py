"""Approvals from your own user interface: a dangerous command waits for your answer.

The turn's events include `ApprovalRequested` (the command, why it is dangerous, the choices);
a front end that said it answers approvals (`answers=("approval",)`) replies with
`agent.respond(request_id, "once" | "session" | "always" | "deny")`, from any thread. Here
"the user" approves once after reading the request; nobody answering means deny.

    python examples/approvals.py
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from endpoint import endpoint

from talaria import Agent, events


def ask_the_user(request: events.ApprovalRequested) -> str:
    """Your dialog goes here; this one shows the request and says yes, once."""
    print(f"approve `{request.command}`? ({request.reason}) -> once")
    return "once"


async def main(work: Path) -> None:
    (work / "build").mkdir()
    (work / "build" / "old.o").write_text("stale")
    options = {"approvals.mode": "manual", "sandbox.mode": "workspace-write"}
    async with Agent(**endpoint(), cwd=work, toolsets=["terminal"], config=options) as agent:
        turn = agent.events("Remove the build folder.", answers=("approval",))
        async for event in turn:
            if isinstance(event, events.ApprovalRequested):
                agent.respond(event.request_id, ask_the_user(event))
        assert turn.result is not None
        print("answer:", turn.result["final_response"])
    print("build folder still there:", (work / "build").exists())


with tempfile.TemporaryDirectory() as folder:
    asyncio.run(main(Path(folder)))
