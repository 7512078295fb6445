"""One boundary for every write: a file tool writes, unasked, only where a sandboxed command
could write.

`write_file` and `patch` run in the agent's own process, so the sandbox cannot hold them; this
module holds them to the same line instead. A write outside the writable roots (or anywhere
under `read-only`) is an approval request, like `terminal(escalate=true)`, and with approvals
`off` it is refused unless the sandbox mode is `full-access`. Protected files
(`talaria.tools.protected_paths`) ask even inside the roots. Without a sandbox (full-access)
the protected set and the sensitive places (`talaria.policy.sensitive_paths`) still ask.

The verdict is on the real path. The executor judges it before the call and records what was
approved; the tool judges what it actually opened again (`check_write`), so a link flipped
between the two can only fail the write, never move it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from talaria.policy.approval import ESCALATED, Assessment
from talaria.policy.sensitive_paths import classify_write, resolve_path, talaria_settings
from talaria.tools.base import Tool, ToolContext, ToolError
from talaria.tools.protected_paths import protected_reason

if TYPE_CHECKING:
    from talaria.tools.sandbox import SandboxPolicy

WRITERS = frozenset({"write_file", "patch"})


def write_path_of(tool_name: str, args: Mapping[str, Any], cwd: Path) -> Path | None:
    """The file a write_file/patch call would change, for the approval check before it runs."""
    raw = args.get("path")
    if tool_name not in WRITERS or not isinstance(raw, str) or not raw:
        return None
    return resolve_path(raw, cwd)


def judge(
    path: Path, sandbox: SandboxPolicy | None, talaria_home: Path | None
) -> Assessment | None:
    """The verdict on writing `path` (None: write it unasked)."""
    real = Path(os.path.realpath(path))
    protected = protected_reason(path, talaria_home)
    sensitive = talaria_settings(path, talaria_home) or classify_write(path)
    if sandbox is not None and sandbox.confines:
        if sandbox.inside(real):
            if protected is None:
                return None
            return Assessment(
                f"write {real}", protected, "write protected file", needs_a_human=True
            )
        where = ", ".join(str(root) for root in sandbox.root_paths) or "nothing (read-only)"
        reason = f"writes {real}, outside the sandbox's writable roots ({where})"
        extra = protected or (sensitive[0] if sensitive else None)
        if extra:
            reason = f"{reason}; {extra}"
        return Assessment(
            f"{ESCALATED} write {real}", reason, "write outside sandbox", needs_a_human=True
        )
    if protected is not None:
        return Assessment(f"write {real}", protected, "write protected file")
    if sensitive is not None:
        return Assessment(f"write {real}", sensitive[0], sensitive[1])
    return None


def writes_files(tool: Tool) -> bool:
    """Whether the write boundary judges this tool's calls (instead of the command rules)."""
    return tool.name in WRITERS or tool.writes is not None


def assess_write_call(
    tool: Tool, arguments: dict[str, Any], ctx: ToolContext[Any]
) -> Assessment | None:
    """The executor's verdict on a file-writing call (`writes_files`) before it runs."""
    if tool.writes is not None:
        target = tool.writes(arguments, ctx.cwd, ctx.home)
    else:
        target = write_path_of(tool.name, arguments, ctx.cwd)
    return None if target is None else judge(target, ctx.sandbox, ctx.home)


def check_write(real: Path, ctx: ToolContext[Any]) -> None:
    """Raise unless this call may write the real path `real`, which the tool has opened: either
    it needs no approval, or it is exactly what the user approved for this call."""
    verdict = judge(real, ctx.sandbox, ctx.home)
    if verdict is None or verdict.command == ctx.approved:
        return
    raise ToolError(
        f"{real} was not written ({verdict.reason}): that was not what this call was approved "
        "for. A link in the path changed after it was checked."
    )
