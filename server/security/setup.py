"""Builds a Listener from its configuration: the TLS context and principal mapping of SSL
listeners, the SASL settings of SASL listeners (Kafka's per-listener settings)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from server.listeners import Listener, ListenerSpec, listener_setting
from server.security.principal import SslPrincipalMapper
from server.security.tls import server_context

if TYPE_CHECKING:
    from server.broker import Broker
    from server.config import Config


def build_listener(spec: ListenerSpec, config: Config, broker: Broker) -> Listener:
    """ValueError (with the listener's name) for a configuration that cannot be served."""
    listener = Listener(spec.name, spec.protocol, spec.host, spec.port, spec.advertised)
    if spec.protocol.uses_tls:
        listener.ssl_context = server_context(config, spec)
        try:
            listener.principal_mapper = SslPrincipalMapper(
                listener_setting(config, spec.name, "ssl.principal.mapping.rules"))
        except ValueError as e:
            raise ValueError(f"listener {spec.name}: ssl.principal.mapping.rules: {e}") from None
    if spec.protocol.uses_sasl:
        raise ValueError(f"listener {spec.name}: {spec.protocol.value} is not served yet")
    return listener
