"""Secrets out of reach, not just out of sight: what the sandbox hides behind empty mounts, and
what `search_files` never opens.

Asking before `cat ~/.aws/credentials` cannot cover every reader (`dd if=`, `rev`, `iconv`,
`find -exec cat`, `tar | tar -xO` ...). So inside the sandbox these are not there to read: a
directory is covered by an empty read-only tmpfs and a file by /dev/null, whatever program
opens them.

- SSH private keys (every file in `~/.ssh` but public keys, `known_hosts`, `config` and
  `authorized_keys`), `~/.aws`, `~/.config/gcloud`, `~/.azure`, `~/.gnupg`,
  `~/.password-store`, `~/.netrc`, `~/.vault-token`, `~/.git-credentials`, `~/.pgpass`;
- the talaria home's config, `.env`, `auth.json` and database;
- the paths configured in `sandbox.hidden_paths`.

`search_files` leaves out the same places, every file `secret_files` counts as a secret, and
any file that holds a private key, whatever it is called.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from pathlib import Path

from talaria.policy.secret_files import TALARIA_SECRETS, secret_reason
from talaria.tools.protected_paths import user_home

HIDDEN_IN_HOME = (
    ".aws",
    ".config/gcloud",
    ".azure",
    ".gnupg",
    ".password-store",
    ".netrc",
    ".vault-token",
    ".git-credentials",
    ".pgpass",
)
"""Relative to the user's home: credential stores, hidden whole."""
SSH_PUBLIC = frozenset({"known_hosts", "known_hosts.old", "config", "authorized_keys"})
"""What stays visible in ~/.ssh (besides `*.pub`): ssh needs it, and it holds no key."""
TALARIA_DATABASE = ("state.db", "state.db-wal", "state.db-shm", "state.db-journal")
KEY_MARK = b"PRIVATE KEY-----"
"""In the first kilobytes of a PEM or OpenSSH private key, whatever the file is called."""


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _ssh_private(path: str, ssh: str) -> bool:
    """Is `path` (below ~/.ssh) something other than a public key or ssh's own lists?"""
    name = os.path.relpath(path, ssh).split(os.sep)[0]
    return name != "." and not name.endswith(".pub") and name not in SSH_PUBLIC


def _hidden_places(talaria_home: Path | None, extra: Iterable[str]) -> list[str]:
    home = user_home()
    places = [os.path.join(home, name) for name in HIDDEN_IN_HOME]
    if talaria_home is not None:
        places += (os.path.join(talaria_home, n) for n in (*TALARIA_SECRETS, *TALARIA_DATABASE))
    places += (os.path.expanduser(path) for path in extra)
    return [os.path.realpath(place) for place in places]


def concealed(path: Path | str, talaria_home: Path | None, extra: Iterable[str] = ()) -> bool:
    """Is `path` a secret that commands cannot see and searches leave out?"""
    real = os.path.realpath(path)
    if secret_reason(path, talaria_home) is not None:
        return True
    ssh = os.path.realpath(os.path.join(user_home(), ".ssh"))
    if _under(real, ssh) and _ssh_private(real, ssh):
        return True
    return any(_under(real, place) for place in _hidden_places(talaria_home, extra))


def hidden_mounts(talaria_home: Path | None, extra: Iterable[str] = ()) -> list[Path]:
    """The existing secret files and directories the sandbox covers, by their real paths."""
    found = [Path(place) for place in _hidden_places(talaria_home, extra)]
    ssh = Path(os.path.realpath(os.path.join(user_home(), ".ssh")))
    with contextlib.suppress(OSError):
        found += (entry for entry in ssh.iterdir() if _ssh_private(str(entry), str(ssh)))
    real = (Path(os.path.realpath(path)) for path in found)
    return list(dict.fromkeys(path for path in real if path.exists()))


def holds_a_key(head: bytes) -> bool:
    """Do these first bytes of a file belong to a private key?"""
    return KEY_MARK in head
