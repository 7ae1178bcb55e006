"""Request and response classes of the share coordinator's inter-broker APIs (KIP-932):
InitializeShareGroupState (83), ReadShareGroupState (84), WriteShareGroupState (85) and
DeleteShareGroupState (86), version 0. A share partition's leader sends them to the leader of
the __share_group_state partition that holds its state (Kafka's persister,
server/share/persister.py); kafka-python 3 has none of them, so they are built from kcoord's
own schemas (protocol/schemas/*.json) like protocol/share_messages.py's."""
from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

from kcoord.protocol import schemas


class InitializeShareGroupStateRequest(ApiMessage, load_json=schemas): pass  # noqa: E701


class InitializeShareGroupStateResponse(ApiMessage, load_json=schemas): pass  # noqa: E701


class ReadShareGroupStateRequest(ApiMessage, load_json=schemas): pass  # noqa: E701


class ReadShareGroupStateResponse(ApiMessage, load_json=schemas): pass  # noqa: E701


class WriteShareGroupStateRequest(ApiMessage, load_json=schemas): pass  # noqa: E701


class WriteShareGroupStateResponse(ApiMessage, load_json=schemas): pass  # noqa: E701


class DeleteShareGroupStateRequest(ApiMessage, load_json=schemas): pass  # noqa: E701


class DeleteShareGroupStateResponse(ApiMessage, load_json=schemas): pass  # noqa: E701
