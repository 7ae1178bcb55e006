"""The broker's security state: SCRAM credentials and (when an authorizer is configured) the
ACL authorizer, both loaded from the log directory at start-up."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from server.security.authorizer import Authorizer, make_authorizer
from server.security.credentials import CredentialStore

if TYPE_CHECKING:
    from server.config import Config

log = logging.getLogger("kcoord.security")


class SecurityState:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.credentials = CredentialStore(config.log_dir)
        # None: no authorizer configured (Kafka's default): everything is allowed
        self.authorizer: Authorizer | None = None

    def load(self, log_dir: Path) -> None:
        """After the log directory is locked. ValueError (StateFileError) when a file cannot be
        replayed or the authorizer cannot be made."""
        assert log_dir == self.credentials.path.parent
        n = self.credentials.load()
        if n:
            log.info("Loaded %d SCRAM credentials from %s", len(self.credentials.state), self.credentials.path)
        self.authorizer = make_authorizer(self.config, log_dir)  # ValueError: an unknown class name
        if self.authorizer is not None:
            self.authorizer.load()
            log.info("StandardAuthorizer: %d ACLs, super.users=%s, allow.everyone.if.no.acl.found=%s",
                     len(self.authorizer.acls), ",".join(sorted(self.authorizer.super_users)) or "(none)",
                     str(self.authorizer.allow_everyone).lower())
