"""Checkpoints of the files the agent may write, per turn: rewind them (and the conversation)
and show what the agent changed. See docs/checkpoints.md."""

from talaria.checkpoints.session import RewindReport, SessionCheckpoints, TurnSummary
from talaria.checkpoints.shadow import CheckpointError
from talaria.checkpoints.storage import checkpoints_root, prune, remove_session, session_dir

__all__ = [
    "CheckpointError",
    "RewindReport",
    "SessionCheckpoints",
    "TurnSummary",
    "checkpoints_root",
    "prune",
    "remove_session",
    "session_dir",
]
