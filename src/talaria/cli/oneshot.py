"""`talaria chat -q`: one question, the answer on stdout, progress on stderr.

Exit codes: 0 the agent answered; 2 the agent failed (the reason is one line on stderr);
1 talaria itself crashed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from talaria.cli.main import EXIT_AGENT_FAILURE, EXIT_CRASH, EXIT_OK
from talaria.cli.options import agent_kwargs, resume_ref


def run_oneshot(args: argparse.Namespace) -> int:
    from talaria.agent import Agent
    from talaria.config import ConfigError
    from talaria.providers.errors import ProviderError
    from talaria.store.base import AmbiguousSession, SessionNotFound

    progress = _StderrProgress() if sys.stderr.isatty() and not args.json else None
    try:
        agent = Agent(
            session_id=resume_ref(args),
            tool_progress_callback=progress.tool if progress else None,
            **agent_kwargs(args),
        )
        with agent:
            result = agent.run_conversation(user_message=args.query)
    except (ConfigError, ProviderError, SessionNotFound, AmbiguousSession, ValueError) as exc:
        print(f"talaria: {exc}", file=sys.stderr)
        return EXIT_AGENT_FAILURE
    except KeyboardInterrupt:
        print("talaria: interrupted", file=sys.stderr)
        return EXIT_AGENT_FAILURE
    except Exception as exc:
        if os.environ.get("TALARIA_DEBUG"):
            raise
        print(f"talaria: crashed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_CRASH
    return _report(result, as_json=args.json)


def _report(result: dict[str, Any], *, as_json: bool) -> int:
    ok = result["completed"] or result["turn_exit_reason"] == "max_iterations_reached"
    if as_json:
        print(json.dumps(result, ensure_ascii=False, default=str))
    elif result.get("final_response"):
        print(result["final_response"])
    if not ok:
        reason = result.get("error") or result["turn_exit_reason"]
        print(f"talaria: {' '.join(str(reason).split())}", file=sys.stderr)
        return EXIT_AGENT_FAILURE
    return EXIT_OK


class _StderrProgress:
    def tool(self, event: Any) -> None:
        if getattr(event, "phase", "") == "start":
            print(f"  ⚙ {event.name}", file=sys.stderr, flush=True)
