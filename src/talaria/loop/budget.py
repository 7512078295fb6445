"""The iteration budget: how many model calls one turn may make.

Each agent has its own budget (children get theirs from `delegation.max_iterations`). Near the
end the model is told how much is left, so it can wrap up instead of being cut off.
"""

from __future__ import annotations

from dataclasses import dataclass

SUMMARY_REQUEST = (
    "[The iteration budget for this turn is used up; no more tools can run.] Reply to the user "
    "now without calling tools: summarise what you did, what you found, and what is left to do."
)


@dataclass
class IterationBudget:
    """How many model calls a turn may still make."""

    limit: int
    used: int = 0

    @property
    def exhausted(self) -> bool:
        return self.used >= self.limit

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.used)

    def spend(self) -> None:
        self.used += 1

    def warning(self) -> str | None:
        """A note for the newest message when the budget runs low (None while it does not)."""
        remaining = self.remaining
        if self.limit < 5 or remaining > max(2, self.limit // 5):
            return None
        return (
            f"[Budget: {remaining} of {self.limit} model calls left in this turn. "
            "Prioritise finishing; leave a clear summary if you cannot.]"
        )
