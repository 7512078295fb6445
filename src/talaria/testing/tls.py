"""A TLS certificate for `ScriptedProvider(ssl_context=...)`: test an `https://` endpoint on
127.0.0.1 without a certificate authority. Clients trust it through `SSL_CERT_FILE`."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path


def self_signed_certificate(directory: Path) -> tuple[Path, Path]:
    """(certificate, key) files for 127.0.0.1 in `directory`, made by the `openssl` command
    (RuntimeError when it is not installed)."""
    if shutil.which("openssl") is None:
        raise RuntimeError("the openssl command is needed to make a test certificate")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


def server_context(directory: Path) -> tuple[ssl.SSLContext, Path]:
    """A server-side TLS context holding a fresh certificate, and that certificate's file."""
    cert, key = self_signed_certificate(directory)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context, cert
