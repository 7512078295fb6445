"""`talaria.testing.tls` for the tests: skipped (failed in CI) where openssl is missing."""

from __future__ import annotations

import os
import shutil
import ssl
from pathlib import Path

import pytest

from talaria.testing import tls


def server_context(directory: Path, name: str = "127.0.0.1") -> tuple[ssl.SSLContext, Path]:
    """A server-side TLS context with a fresh certificate for `name`, and its file."""
    if shutil.which("openssl") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("openssl is required for the TLS tests (apt-get install openssl)")
        pytest.skip("openssl is not installed")
    return tls.server_context(directory, name)
