"""Which files hold secrets, so that reading one needs a human's yes.

What a tool reads goes to the model and into the session store. The agent's own config.yaml
holds its API key, `.env` files hold a project's, and the usual credential files hold the
user's: `read_file` and the terminal's readers (`cat .env`, `grep KEY ~/.netrc`) ask first.
"""

from __future__ import annotations

import fnmatch
import os
import re
from pathlib import Path

from talaria.policy.approval import Assessment

TALARIA_SECRETS = ("config.yaml", ".env", "auth.json")
"""Relative to the talaria home."""
USER_CREDENTIALS = (
    ".aws/credentials",
    ".netrc",
    ".pgpass",
    ".git-credentials",
    ".docker/config.json",
    ".npmrc",
    ".pypirc",
    ".kube/config",
    ".config/gh/hosts.yml",
    ".config/gcloud/credentials.db",
    ".gnupg/*",
    ".password-store/*",
)
"""Relative to the user's home (glob patterns)."""
_PRIVATE_KEY = re.compile(r"id_(rsa|dsa|ecdsa|ed25519)(_sk)?$")
_ENV_FILE = re.compile(r"\.env(\.[\w.-]+)?|[\w.-]+\.env|\.envrc")
_ENV_TEMPLATES = frozenset({"example", "sample", "template", "dist", "defaults"})


def _forms(path: Path) -> list[str]:
    absolute = os.path.normpath(os.path.abspath(os.path.expanduser(path)))
    return list(dict.fromkeys([absolute, os.path.realpath(absolute)]))


def _is_env_file(name: str) -> bool:
    """`.env`, `.env.local`, `prod.env`; not `.env.example` or `environment.py`."""
    suffix = name.rsplit(".", 1)[-1].lower()
    return _ENV_FILE.fullmatch(name) is not None and suffix not in _ENV_TEMPLATES


def secret_reason(path: Path | str, talaria_home: Path | None) -> str | None:
    """Why `path` counts as a secret (None when it does not)."""
    home = os.path.normpath(os.path.expanduser("~"))
    own = _forms(talaria_home) if talaria_home is not None else []
    for form in _forms(Path(path)):
        name = os.path.basename(form)
        if any(form == os.path.join(root, name) for root in own) and name in TALARIA_SECRETS:
            return f"talaria's own settings and API keys ({form})"
        if _is_env_file(name):
            return f"an environment file that usually holds keys ({form})"
        if _PRIVATE_KEY.search(name):
            return f"a private SSH key ({form})"
        relative = os.path.relpath(form, home)
        if not relative.startswith("..") and any(
            fnmatch.fnmatch(relative, pattern) for pattern in USER_CREDENTIALS
        ):
            return f"a credentials file ({form})"
    return None


def assess_secret_read(path: Path, talaria_home: Path | None) -> Assessment | None:
    """The approval verdict for reading `path` into the conversation."""
    reason = secret_reason(path, talaria_home)
    if reason is None:
        return None
    return Assessment(command=f"read {path}", reason=f"reads {reason}", pattern="read secrets")
