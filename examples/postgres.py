"""Sessions in PostgreSQL: what one process writes, another (on any host) resumes.

Needs `pip install 'talaria[postgres]'` and a database of its own; `TALARIA_EXAMPLE_PG_URL`
names it (`bash scripts/pg_throwaway.sh start /tmp/pg 55432` prints one for trying).

    TALARIA_EXAMPLE_PG_URL=postgresql://postgres@127.0.0.1:55432/postgres \\
        python examples/postgres.py
"""

from __future__ import annotations

import os
import tempfile

from endpoint import endpoint

from talaria import Agent

config = {"store.url": os.environ["TALARIA_EXAMPLE_PG_URL"]}

with tempfile.TemporaryDirectory() as home:
    with Agent(**endpoint(), home=home, config=config, tools=[]) as first:
        print("first agent:", first.chat("Remember the word 'pelican'."))
        session = first.session_id

    # a new agent (think: another process, another host) continues the same session
    with Agent(**endpoint(), home=home, config=config, tools=[], session_id=session) as second:
        print("second agent:", second.chat("Which word did I ask you to remember?"))
        stored = second.store.load_messages(session or "")
    print(f"session {session}: {len(stored)} messages in PostgreSQL")
