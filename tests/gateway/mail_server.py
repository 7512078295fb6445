"""A real mail server for the email gateway tests: Dovecot (IMAP, the distribution's
`dovecot-imapd`) on loopback with a passwd-file per test user, and an SMTP server (aiosmtpd)
that delivers each accepted message through Dovecot's own LDA, so a real IMAP client (the
gateway's, a test user's) finds it in the recipient's INBOX."""

from __future__ import annotations

import asyncio
import imaplib
import os
import pwd
import subprocess
from collections.abc import Iterator
from email import message_from_bytes, policy
from email.message import EmailMessage, Message

import pytest
from chat_server import ServerProcess, free_port, require

DOMAIN = "example.test"
LDA = "/usr/lib/dovecot/dovecot-lda"

CONFIG = """\
protocols = imap
listen = 127.0.0.1
base_dir = {dir}/run
state_dir = {dir}/state
log_path = {dir}/dovecot.log
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
first_valid_uid = 0
{users}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {port}
  }}
  inet_listener imaps {{
    port = 0
  }}
  chroot =
}}
service anvil {{
  chroot =
}}
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {dir}/passwd.d/%u
}}
userdb {{
  driver = static
  args = uid={uid} gid={gid} home={dir}/mail/%u allow_all_users=yes
}}
mail_location = maildir:~/Maildir
"""


class MailServer:
    """Dovecot and an SMTP server sharing one set of users (`add_user`)."""

    def __init__(self) -> None:
        self.dovecot = require("/usr/sbin/dovecot", "the dovecot-imapd package")
        require(LDA, "the dovecot-core package")
        self.process = ServerProcess("dovecot")
        self.dir = self.process.directory
        self.imap_port = free_port()
        self.smtp_port = free_port()
        self.passwords: dict[str, str] = {}
        self._smtp: object | None = None

    def start(self) -> None:
        if os.geteuid() == 0:
            # Dovecot will not run its login processes or mail access as root: the package's
            # own users do (mail as `dovecot`, which then owns the maildirs).
            account = pwd.getpwnam("dovecot")
            users = ""
        else:
            account = pwd.getpwuid(os.geteuid())
            users = (
                f"default_login_user = {account.pw_name}\n"
                f"default_internal_user = {account.pw_name}\n"
                f"default_internal_group = {account.pw_gid}"
            )
        for sub in ("run", "state", "mail"):
            (self.dir / sub).mkdir()
        os.chown(self.dir / "mail", account.pw_uid, account.pw_gid)
        (self.dir / "passwd.d").mkdir()
        (self.dir / "dovecot.conf").write_text(
            CONFIG.format(
                dir=self.dir,
                users=users,
                port=self.imap_port,
                uid=account.pw_uid,
                gid=account.pw_gid,
            )
        )
        self.process.spawn([self.dovecot, "-F", "-c", str(self.dir / "dovecot.conf")])
        self.process.wait_listening(self.imap_port, greeting=b"* OK")
        self._start_smtp()

    def _start_smtp(self) -> None:
        from aiosmtpd.controller import Controller
        from aiosmtpd.smtp import AuthResult

        server = self

        def authenticate(_server, _session, _envelope, _mechanism, auth_data):  # type: ignore[no-untyped-def]
            login = auth_data.login.decode()
            ok = server.passwords.get(login) == auth_data.password.decode()
            return AuthResult(success=ok)

        class Deliver:
            async def handle_RCPT(self, _server, _session, envelope, address, _options):  # type: ignore[no-untyped-def]
                if address.lower() not in server.passwords:
                    return "550 5.1.1 no such user here"
                envelope.rcpt_tos.append(address.lower())
                return "250 OK"

            async def handle_DATA(self, _server, _session, envelope):  # type: ignore[no-untyped-def]
                for rcpt in envelope.rcpt_tos:
                    # subprocess in a thread: this loop is not the main thread's, and asyncio's
                    # child watcher reports its children to the main thread's loop
                    lda = await asyncio.to_thread(
                        subprocess.run,
                        [LDA, "-c", str(server.dir / "dovecot.conf"), "-d", rcpt,
                         "-f", envelope.mail_from],
                        input=envelope.original_content,
                        capture_output=True,
                        timeout=60,
                    )  # fmt: skip
                    if lda.returncode != 0:
                        why = f"({lda.returncode}) {lda.stderr.decode()[:200]}"
                        return f"451 4.3.0 delivery to {rcpt} failed: {why}"
                return "250 OK delivered"

        controller = Controller(
            Deliver(),
            hostname="127.0.0.1",
            port=self.smtp_port,
            authenticator=authenticate,
            auth_require_tls=False,
        )
        controller.start()
        self._smtp = controller

    def add_user(self, name: str, password: str = "secret") -> str:
        """A mailbox `name@example.test` (its address) that IMAP and SMTP both accept."""
        address = f"{name}@{DOMAIN}"
        self.passwords[address] = password
        # a file per user: Dovecot may keep reading a cached passwd-file changed in the same second
        (self.dir / "passwd.d" / address).write_text(f"{address}:{{PLAIN}}{password}\n")
        return address

    def send(self, message: Message) -> None:
        """Send `message` through this server's SMTP, as a user's mail client would."""
        import smtplib

        with smtplib.SMTP("127.0.0.1", self.smtp_port, timeout=30) as smtp:
            smtp.send_message(message)

    def inbox(self, address: str) -> list[EmailMessage]:
        """Every message in the INBOX of `address`, oldest first, read over IMAP."""
        with imaplib.IMAP4("127.0.0.1", self.imap_port, timeout=30) as imap:
            imap.login(address, self.passwords[address])
            imap.select("INBOX", readonly=True)
            _, data = imap.search(None, "ALL")
            found = []
            for number in data[0].split():
                _, parts = imap.fetch(number, "(BODY.PEEK[])")
                raw = parts[0]
                assert isinstance(raw, tuple)
                found.append(message_from_bytes(raw[1], _class=EmailMessage, policy=policy.default))
            return found

    def unflag(self, address: str, keyword: str) -> None:
        """Take `keyword` off every message of the INBOX of `address`."""
        with imaplib.IMAP4("127.0.0.1", self.imap_port, timeout=30) as imap:
            imap.login(address, self.passwords[address])
            imap.select("INBOX")
            imap.store("1:*", "-FLAGS", f"({keyword})")

    def stop(self) -> None:
        if self._smtp is not None:
            self._smtp.stop()  # type: ignore[attr-defined]
        self.process.stop()


@pytest.fixture(scope="session")
def mail_server() -> Iterator[MailServer]:
    server = MailServer()
    try:
        server.start()
        yield server
    finally:
        server.stop()
