"""Secrets taken out of a request before anything shows it (the control API's recording of
requests, server/control/recorder.py): SASL tokens (a PLAIN password travels in the clear in
SaslAuthenticate), SCRAM salted passwords and salts (AlterUserScramCredentials), and the
values of password configs (AlterConfigs / IncrementalAlterConfigs of a broker: a name kcoord
does not know is treated as a secret too, as DescribeConfigs does). They read "[hidden]", as
Kafka's Password prints."""
from __future__ import annotations

from typing import Any

from kcoord.protocol.api import ApiKey

HIDDEN = "[hidden]"
_BROKER = 4  # ConfigResource.Type.BROKER


def _secret_config(name: str) -> bool:
    from kcoord.server.config_layers import broker_config_key  # the config catalogue imports much

    key = broker_config_key(name)
    return key is None or key.sensitive


def redacted(api: int, body: dict[str, Any]) -> dict[str, Any]:
    """`body` (a request's to_dict()) with its secrets replaced; changed in place and returned."""
    if api == ApiKey.SASL_AUTHENTICATE:
        if body.get("auth_bytes"):
            body["auth_bytes"] = HIDDEN
    elif api == ApiKey.ALTER_USER_SCRAM_CREDENTIALS:
        for u in body.get("upsertions") or ():
            u["salt"] = HIDDEN
            u["salted_password"] = HIDDEN
    elif api in (ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS):
        for r in body.get("resources") or ():
            if r.get("resource_type") != _BROKER:
                continue
            for c in r.get("configs") or ():
                if c.get("value") is not None and _secret_config(str(c.get("name"))):
                    c["value"] = HIDDEN
    return body
