"""The SMTP side of the email tests' mail server, run as a process of its own (mail_server.py
starts it): aiosmtpd on loopback, logins checked against the passwd-files Dovecot reads, each
accepted message handed to Dovecot's LDA for every recipient. Stops when its stdin closes.

    python smtp_server.py PORT LDA DOVECOT_CONF PASSWD_DIR
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any


def main(port: int, lda: str, config: str, passwd_dir: Path) -> None:
    from aiosmtpd.controller import Controller
    from aiosmtpd.smtp import AuthResult

    def password_of(address: str) -> str | None:
        entry = passwd_dir / address
        if not entry.exists():
            return None
        return entry.read_text().strip().split("{PLAIN}", 1)[1]

    def authenticate(_server: Any, _session: Any, _envelope: Any, _mech: Any, auth: Any) -> Any:
        return AuthResult(success=password_of(auth.login.decode()) == auth.password.decode())

    class Deliver:
        async def handle_RCPT(self, _server: Any, _session: Any, envelope: Any, address: str,
                              _options: Any) -> str:  # fmt: skip
            if password_of(address.lower()) is None:
                return "550 5.1.1 no such user here"
            envelope.rcpt_tos.append(address.lower())
            return "250 OK"

        async def handle_DATA(self, _server: Any, _session: Any, envelope: Any) -> str:
            for rcpt in envelope.rcpt_tos:
                command = [lda, "-c", config, "-d", rcpt, "-f", envelope.mail_from]
                done = await asyncio.to_thread(
                    subprocess.run, command, input=envelope.original_content,
                    capture_output=True, timeout=60,
                )  # fmt: skip
                if done.returncode != 0:
                    why = f"({done.returncode}) {done.stderr.decode()[:200]}"
                    return f"451 4.3.0 delivery to {rcpt} failed: {why}"
            return "250 OK delivered"

    controller = Controller(
        Deliver(), hostname="127.0.0.1", port=port, authenticator=authenticate,
        auth_require_tls=False,
    )  # fmt: skip
    controller.start()
    sys.stdin.read()
    controller.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], sys.argv[3], Path(sys.argv[4]))
