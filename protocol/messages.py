"""Request and response classes for the APIs kafka-python 3 has no schema for, built by its
machinery from kcoord's own schemas (protocol/schemas/*.json): they encode, decode and behave
like every other kafka-python message class."""
from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

from kcoord.protocol import schemas


class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=schemas): pass  # noqa: E701


class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=schemas): pass  # noqa: E701


class ConsumerGroupDescribeRequest(ApiMessage, load_json=schemas): pass  # noqa: E701


class ConsumerGroupDescribeResponse(ApiMessage, load_json=schemas): pass  # noqa: E701
