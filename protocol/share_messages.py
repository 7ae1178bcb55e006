"""Request and response classes of the share-group APIs (KIP-932): ShareGroupHeartbeat (76),
ShareGroupDescribe (77), ShareFetch (78), ShareAcknowledge (79), DescribeShareGroupOffsets (90),
AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92), at the versions Kafka 4.3 serves.
kafka-python 3 has none of them; they are built, like protocol/messages.py's, from kcoord's own
schemas (protocol/schemas/*.json).

protocol/api.py names the classes of the APIs kcoord serves (see docs/share-groups.md)."""
from __future__ import annotations

from kafka.protocol.api_message import ApiMessage

from kcoord.protocol import schemas


class ShareGroupHeartbeatRequest(ApiMessage, load_json=schemas): pass  # noqa: E701


class ShareGroupHeartbeatResponse(ApiMessage, load_json=schemas): pass  # noqa: E701


class ShareGroupDescribeRequest(ApiMessage, load_json=schemas): pass  # noqa: E701


class ShareGroupDescribeResponse(ApiMessage, load_json=schemas): pass  # noqa: E701


class ShareFetchRequest(ApiMessage, load_json=schemas): pass  # noqa: E701


class ShareFetchResponse(ApiMessage, load_json=schemas): pass  # noqa: E701


class ShareAcknowledgeRequest(ApiMessage, load_json=schemas): pass  # noqa: E701


class ShareAcknowledgeResponse(ApiMessage, load_json=schemas): pass  # noqa: E701


class DescribeShareGroupOffsetsRequest(ApiMessage, load_json=schemas): pass  # noqa: E701


class DescribeShareGroupOffsetsResponse(ApiMessage, load_json=schemas): pass  # noqa: E701


class AlterShareGroupOffsetsRequest(ApiMessage, load_json=schemas): pass  # noqa: E701


class AlterShareGroupOffsetsResponse(ApiMessage, load_json=schemas): pass  # noqa: E701


class DeleteShareGroupOffsetsRequest(ApiMessage, load_json=schemas): pass  # noqa: E701


class DeleteShareGroupOffsetsResponse(ApiMessage, load_json=schemas): pass  # noqa: E701


ALL = (
    ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse,
    ShareGroupDescribeRequest, ShareGroupDescribeResponse,
    ShareFetchRequest, ShareFetchResponse,
    ShareAcknowledgeRequest, ShareAcknowledgeResponse,
    DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse,
    AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse,
)
