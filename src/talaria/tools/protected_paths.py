"""What stays read-only even inside the writable roots: files whose content runs later, outside
the sandbox, with the user's authority.

- git metadata: every `.git` (a directory, or a file pointing elsewhere, and where it points),
  and any directory shaped like one (HEAD with objects, refs or commondir: a renamed or copied
  `.git`, a bare repository). `git status`, often run by the shell prompt, runs its config's
  fsmonitor, pager and hooks.
- the talaria home's config, hook settings and trust, plugins, skills, agents, memories,
  SOUL.md and database: the next agent loads them.
- files that run code later: shell startup files, git's user config, autostart entries,
  systemd user units, crontabs, `.pth` and `sitecustomize` files in site-packages, and
  talaria's own installation and interpreter.

The file tools ask this module by path (`protected_reason`); the sandbox mounts the same set
read-only for commands (`protected_mounts`, found once per session; git metadata that commands
create later is handled by `talaria.tools.git_watch`).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterable
from pathlib import Path

from talaria.policy.sensitive_paths import SHELL_STARTUP_FILES

RUN_LATER = (
    *sorted(SHELL_STARTUP_FILES),
    ".inputrc",
    ".xprofile",
    ".xsessionrc",
    ".xinitrc",
    ".pam_environment",
    ".gitconfig",
    ".ssh",
    ".config/git",
    ".config/fish",
    ".config/autostart",
    ".config/systemd/user",
    ".config/environment.d",
    ".local/share/systemd/user",
)
"""Relative to the user's home: code (or config that names code) that runs in a later shell,
session or git command, outside any sandbox."""
TALARIA_OWN = (
    "config.yaml",
    ".env",
    "auth.json",
    "SOUL.md",
    "settings.json",
    "trusted_hooks.json",
    "plugins",
    "skills",
    "agents",
    "memories",
    "state.db",
    "state.db-wal",
    "state.db-shm",
    "state.db-journal",
)
"""Relative to the talaria home: what the next agent loads, and its database (logs and tool
outputs beside them are not protected: a workspace may hold the home)."""
SYSTEM_RUN_LATER = ("/var/spool/cron", "/etc/cron.d")
"""Crontabs: run by cron, outside any sandbox."""
_SITE_DIRS = frozenset({"site-packages", "dist-packages"})
_SITE_HOOKS = frozenset({"sitecustomize.py", "usercustomize.py"})
SCAN_LIMIT = 20_000
"""Directories visited in the writable roots when looking for git metadata (a bounded walk)."""


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _real(path: Path | str) -> str:
    return os.path.realpath(os.path.expanduser(path))


def user_home() -> str:
    """The user's home as the process sees it now ($HOME: tests and sandboxes move it)."""
    return os.path.normpath(os.path.expanduser("~"))


@functools.cache
def installation() -> tuple[str, ...]:
    """talaria's own code, the interpreter's prefixes and its site-packages: rewriting any of
    them changes what the next talaria process runs."""
    import site

    package = str(Path(__file__).resolve().parent.parent)
    places = [package, sys.prefix, sys.exec_prefix, os.path.dirname(sys.executable)]
    places += site.getsitepackages() if hasattr(site, "getsitepackages") else []
    places.append(site.getusersitepackages())
    return tuple(dict.fromkeys(_real(place) for place in places))


def git_shaped(directory: Path, adding: Path | None = None) -> bool:
    """Does `directory` look like a git directory (HEAD beside objects, refs or commondir),
    counting `adding`, a path about to be written, as present?"""

    def present(name: str) -> bool:
        entry = directory / name
        return (adding is not None and (adding == entry or entry in adding.parents)) or (
            os.path.lexists(entry)
        )

    return present("HEAD") and any(present(name) for name in ("objects", "refs", "commondir"))


def protected_reason(path: Path, talaria_home: Path | None) -> str | None:
    """Why writing `path` must be asked even inside the writable roots (None: it need not).
    Judged on the path as written and on its real location."""
    written = os.path.normpath(os.path.abspath(os.path.expanduser(path)))
    forms = list(dict.fromkeys([written, os.path.realpath(written)]))
    home = user_home()
    homes = list(dict.fromkeys([home, os.path.realpath(home)]))
    own = [os.path.join(_real(talaria_home), name) for name in TALARIA_OWN] if talaria_home else []
    for form in forms:
        parts = Path(form).parts
        if ".git" in parts or any(git_shaped(Path(a), Path(form)) for a in Path(form).parents):
            return f"changes git metadata ({form}), which git runs code from outside the sandbox"
        if any(_under(form, place) for place in own):
            return f"changes talaria's own files ({form}), which the next agent loads"
        for base in homes:
            if any(_under(form, os.path.join(base, name)) for name in RUN_LATER):
                return f"changes {form}, which runs code in a later shell or session"
        if any(_under(form, place) for place in SYSTEM_RUN_LATER):
            return f"changes a crontab ({form})"
        if _SITE_DIRS & set(parts) and (form.endswith(".pth") or parts[-1] in _SITE_HOOKS):
            return f"changes {form}, which every Python start runs"
        if any(_under(form, place) for place in installation()):
            return f"changes talaria's own installation or interpreter ({form})"
    return None


def protected_mounts(
    roots: Iterable[Path], talaria_home: Path | None, git: Iterable[Path]
) -> list[Path]:
    """The existing protected paths inside `roots`, for the sandbox to mount read-only; `git`
    is the git metadata found there (`talaria.tools.git_watch`)."""
    roots = list(roots)
    home = user_home()
    candidates: list[str] = [os.path.join(home, name) for name in RUN_LATER]
    candidates += [*installation(), *SYSTEM_RUN_LATER]
    if talaria_home is not None:
        candidates += (os.path.join(talaria_home, name) for name in TALARIA_OWN)
    candidates += (str(path) for path in git)
    found: list[Path] = []
    for candidate in candidates:
        real = _real(candidate)
        if os.path.exists(real) and any(_under(real, str(root)) for root in roots):
            found.append(Path(real))
    return list(dict.fromkeys(found))
