"""The policy's three verdicts on a command, and what each means with and without a sandbox.

- **safe**: read-only programs and harmless forms (`git status`, `ls -la`, `grep -rn x src`):
  never asks.
- **unknown**: everything the policy has no rule for (`make test`, `python3 script.py`):
  runs inside the sandbox without asking, and asks when there is no sandbox (`full-access`,
  or bubblewrap missing), because then nothing else contains it.
- **dangerous**: a rule matched. It asks (`ask`), or it is the floor (`floor`), refused in
  every mode. A dangerous command whose target is known only at run time (`unresolved`:
  `rm -rf "$(cat dirs)"`, `kill -9 $(pgrep x)`) is contained by the sandbox; without one it
  runs only with an answered approval, never unattended.
"""

from __future__ import annotations

from dataclasses import dataclass

from talaria.policy.approval import Assessment

SAFE = "safe"
UNKNOWN = "unknown"
ASK = "ask"
FLOOR = "floor"
NO_SANDBOX = "no sandbox"
"""The pattern of an unknown command asked about because nothing contains it."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the policy says about one command line."""

    level: str
    """SAFE, UNKNOWN, ASK or FLOOR."""
    reason: str = ""
    pattern: str = ""
    unresolved: bool = False
    """An ASK whose target is computed at run time: never unconfined without a yes."""
    unknown: tuple[str, ...] = ()
    """The programs that made an UNKNOWN verdict unknown, first seen first."""


def assessment_for(command: str, verdict: Verdict, sandboxed: bool) -> Assessment | None:
    """The approval request for `command` (None: it runs without asking), given whether it
    runs inside the sandbox."""
    if verdict.level == SAFE or (verdict.level == UNKNOWN and sandboxed):
        return None
    if verdict.level == UNKNOWN:
        names = ", ".join(verdict.unknown[:4])
        reason = f"runs {names} with no sandbox to contain it (not known to be harmless)"
        return Assessment(command=command, reason=reason, pattern=NO_SANDBOX)
    if verdict.level == FLOOR:
        return Assessment(command, verdict.reason, verdict.pattern, blocked=True)
    unattended = verdict.unresolved and not sandboxed
    reason = verdict.reason
    if unattended:
        reason += "; its target is known only at run time and no sandbox contains it"
    return Assessment(command, reason, verdict.pattern, needs_a_human=unattended)
