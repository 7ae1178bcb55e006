"""The broker's security state: SCRAM credentials and (when an authorizer is configured) the
ACL authorizer, both loaded from the log directory at start-up. Their modules load only when
there is something of theirs: a credentials file, an authorizer configured, a SASL listener
or a SCRAM request (a server without security starts without them)."""
from __future__ import annotations

import logging
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kcoord.server.config import Config
    from kcoord.server.security.authorizer import Authorizer
    from kcoord.server.security.credentials import CredentialStore

log = logging.getLogger("kcoord.security")

CREDENTIALS_FILE = "kcoord-scram-credentials.json"  # server/security/credentials.py


class SecurityState:
    def __init__(self, config: Config) -> None:
        self.config = config
        # None: no authorizer configured (Kafka's default): everything is allowed
        self.authorizer: Authorizer | None = None

    @cached_property
    def credentials(self) -> CredentialStore:
        """The SCRAM credentials (loaded at start-up when the file exists, else empty)."""
        from kcoord.server.security.credentials import CredentialStore

        return CredentialStore(self.config.log_dir)

    def load(self, log_dir: Path) -> None:
        """After the log directory is locked. ValueError (StateFileError) when a file cannot be
        replayed or the authorizer cannot be made."""
        assert log_dir == self.config.log_dir
        if (log_dir / CREDENTIALS_FILE).exists():
            n = self.credentials.load()
            if n:
                log.info("Loaded %d SCRAM credentials from %s", len(self.credentials.state), self.credentials.path)
        if self.config["authorizer.class.name"]:
            from kcoord.server.security.authorizer import make_authorizer

            self.authorizer = make_authorizer(self.config, log_dir)  # ValueError: an unknown class name
        if self.authorizer is not None:
            self.authorizer.load()
            log.info("StandardAuthorizer: %d ACLs, super.users=%s, allow.everyone.if.no.acl.found=%s",
                     len(self.authorizer.acls), ",".join(sorted(self.authorizer.super_users)) or "(none)",
                     str(self.authorizer.allow_everyone).lower())
