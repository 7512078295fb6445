"""A TLS certificate for `ScriptedProvider(ssl_context=...)`: test an `https://` endpoint on
127.0.0.1 (or under a DNS name a test resolves there) without a certificate authority.
Clients trust it through `SSL_CERT_FILE`."""

from __future__ import annotations

import ipaddress
import shutil
import ssl
import subprocess
from pathlib import Path


def self_signed_certificate(directory: Path, name: str = "127.0.0.1") -> tuple[Path, Path]:
    """(certificate, key) files for `name` (an IP address or a DNS name) in `directory`, made
    by the `openssl` command (RuntimeError when it is not installed)."""
    if shutil.which("openssl") is None:
        raise RuntimeError("the openssl command is needed to make a test certificate")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", f"/CN={name}",
         "-addext", f"subjectAltName={_kind(name)}:{name}"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key


def _kind(name: str) -> str:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return "DNS"
    return "IP"


def server_context(directory: Path, name: str = "127.0.0.1") -> tuple[ssl.SSLContext, Path]:
    """A server-side TLS context holding a fresh certificate for `name`, and that
    certificate's file."""
    cert, key = self_signed_certificate(directory, name)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context, cert
