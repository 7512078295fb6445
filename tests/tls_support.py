"""A self-signed certificate for 127.0.0.1 (made by the openssl command), for TLS servers in
tests; clients trust it through SSL_CERT_FILE."""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
from pathlib import Path

import pytest


def self_signed_certificate(directory: Path) -> tuple[Path, Path]:
    """(certificate, key); skips (fails in CI) where openssl is missing."""
    if shutil.which("openssl") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("openssl is required for the TLS tests (apt-get install openssl)")
        pytest.skip("openssl is not installed")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


def server_context(directory: Path) -> tuple[ssl.SSLContext, Path]:
    """A server-side TLS context with a fresh certificate, and that certificate's file."""
    cert, key = self_signed_certificate(directory)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context, cert
