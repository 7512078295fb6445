"""A real mail server for the email gateway tests: Dovecot (IMAP, the distribution's
`dovecot-imapd`) on loopback with a passwd-file per test user, and an SMTP server (aiosmtpd)
that delivers each accepted message through Dovecot's own LDA, so a real IMAP client (the
gateway's, a test user's) finds it in the recipient's INBOX."""

from __future__ import annotations

import imaplib
import os
import pwd
import subprocess
import sys
from collections.abc import Iterator
from email import message_from_bytes, policy
from email.message import EmailMessage, Message
from pathlib import Path

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
        self.smtp_process = ServerProcess("smtp")

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
        """The SMTP server in a process of its own (its event loop is not this process's)."""
        script = Path(__file__).with_name("smtp_server.py")
        conf, passwd = str(self.dir / "dovecot.conf"), str(self.dir / "passwd.d")
        self.smtp_process.proc = subprocess.Popen(
            [sys.executable, str(script), str(self.smtp_port), LDA, conf, passwd],
            stdin=subprocess.PIPE,
            cwd=self.smtp_process.directory,
        )
        self.smtp_process.wait_listening(self.smtp_port, greeting=b"220")

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
        smtp = self.smtp_process.proc
        if smtp is not None and smtp.stdin is not None:
            smtp.stdin.close()  # its signal to stop
        self.smtp_process.stop()
        self.process.stop()


@pytest.fixture(scope="session")
def mail_server() -> Iterator[MailServer]:
    server = MailServer()
    try:
        server.start()
        yield server
    finally:
        server.stop()
