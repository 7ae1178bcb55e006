"""Builds a Listener from its configuration: the TLS context and principal mapping of SSL
listeners, the SASL settings of SASL listeners (Kafka's per-listener settings)."""
from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from kcoord.server.listeners import Listener, ListenerSpec, listener_setting

if TYPE_CHECKING:
    from kcoord.server.config import Config
    from kcoord.server.security.credentials import CredentialStore
    from kcoord.server.security.sasl import SaslSettings

log = logging.getLogger("kcoord.security")

def build_listener(spec: ListenerSpec, config: Config, credentials: Callable[[], CredentialStore]) -> Listener:
    """ValueError (with the listener's name) for a configuration that cannot be served.
    `credentials`: the node's SCRAM credentials, taken only for a SASL listener."""
    listener = Listener(spec.name, spec.protocol, spec.host, spec.port, spec.advertised)
    if spec.protocol.uses_tls:  # the TLS and SASL modules load for the listeners that use them
        from kcoord.server.security.principal import SslPrincipalMapper
        from kcoord.server.security.tls import server_context

        listener.ssl_context = server_context(config, spec)
        try:
            listener.principal_mapper = SslPrincipalMapper(
                listener_setting(config, spec.name, "ssl.principal.mapping.rules"))
        except ValueError as e:
            raise ValueError(f"listener {spec.name}: ssl.principal.mapping.rules: {e}") from None
    if spec.protocol.uses_sasl:
        listener.sasl = sasl_settings(spec, config, credentials)
    return listener


def sasl_settings(spec: ListenerSpec, config: Config, credentials: Callable[[], CredentialStore]) -> SaslSettings:
    from kcoord.server.security.jaas import JaasError, parse_jaas_config, plain_users
    from kcoord.server.security.sasl import SUPPORTED_MECHANISMS, SaslSettings

    name = spec.name
    mechanisms = list(dict.fromkeys(m.upper() for m in listener_setting(config, name, "sasl.enabled.mechanisms")))
    if not mechanisms:
        raise ValueError(f"listener {name}: No SASL mechanisms are enabled (sasl.enabled.mechanisms)")
    unsupported = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
    if unsupported:
        raise ValueError(f"listener {name}: SASL mechanism {', '.join(unsupported)} is not supported by kcoord "
                         f"(sasl.enabled.mechanisms; kcoord serves {', '.join(SUPPORTED_MECHANISMS)})")
    scoped = config.listener_overrides.get(name.lower(), {})
    if config["sasl.jaas.config"]:
        log.warning("Server config sasl.jaas.config should be prefixed with SASL mechanism name, ignoring config")
    settings = SaslSettings(
        mechanisms=mechanisms,
        max_receive_size=listener_setting(config, name, "sasl.server.max.receive.size"),
        failure_delay_ms=config["connection.failed.authentication.delay.ms"],
        credentials=credentials(),
    )
    for mech in mechanisms:
        reauth = listener_setting(config, name, "connections.max.reauth.ms", mech)
        if reauth > 0:
            settings.reauth_ms[mech] = reauth
        jaas = scoped.get(f"{mech.lower()}.sasl.jaas.config")
        if mech == "PLAIN":
            if not jaas:
                raise ValueError(
                    f"listener {name}: SASL/PLAIN needs its users in listener.name.{name.lower()}.plain.sasl.jaas.config "
                    '(org.apache.kafka.common.security.plain.PlainLoginModule required user_<name>="<password>";)')
            try:
                settings.plain_users = plain_users(jaas.value)
            except JaasError as e:
                raise ValueError(f"listener {name}: listener.name.{name.lower()}.plain.sasl.jaas.config: {e}") from None
        elif jaas:
            try:
                parse_jaas_config(jaas.value)
            except JaasError as e:
                raise ValueError(f"listener {name}: listener.name.{name.lower()}.{mech.lower()}.sasl.jaas.config: "
                                 f"{e}") from None
    return settings
