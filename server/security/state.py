"""The broker's security state: SCRAM credentials and (when an authorizer is configured) the
ACL authorizer, both loaded from the log directory at start-up."""
from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from server.security.credentials import CredentialStore

if TYPE_CHECKING:
    from server.config import Config

log = logging.getLogger("kcoord.security")


class SecurityState:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.credentials = CredentialStore(config.log_dir)

    def load(self, log_dir: Path) -> None:
        """After the log directory is locked. StateFileError when a file cannot be replayed."""
        assert log_dir == self.credentials.path.parent
        n = self.credentials.load()
        if n:
            log.info("Loaded %d SCRAM credentials from %s", len(self.credentials.state), self.credentials.path)
