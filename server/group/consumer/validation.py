"""What a ConsumerGroupHeartbeat must be before it changes anything: the request's own fields
(Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid) and the member epoch it claims against
the one the coordinator knows (throwIfConsumerGroupMemberEpochIsInvalid). A refusal is a
RequestError carrying the error code and Kafka's message; protocol.py answers it."""
from __future__ import annotations

from typing import Any

from kcoord.protocol.coordinator_records import Assignment
from kcoord.protocol.errors import ErrorCode
from kcoord.server.group.consumer.member import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupMember,
)
from kcoord.server.group.consumer.regex import compile_regex


class RequestError(Exception):
    """The heartbeat is refused with `code` (and Kafka's `message`), nothing changed."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def check_request(req: Any, version: int, group_error: ErrorCode | None, assignor_names: list[str]) -> None:
    """`group_error`: what the group metadata manager says of the group id (loading, not the
    coordinator, invalid)."""
    if group_error is ErrorCode.INVALID_GROUP_ID:
        raise RequestError(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
    if group_error is not None:
        raise RequestError(group_error)
    if req.instance_id == "":
        raise RequestError(ErrorCode.INVALID_REQUEST, "InstanceId can't be empty.")
    if req.rack_id == "":
        raise RequestError(ErrorCode.INVALID_REQUEST, "RackId can't be empty.")
    epoch = req.member_epoch
    if version >= 1 and not req.member_id:
        raise RequestError(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
    if epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
        if not req.member_id:
            raise RequestError(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
    elif epoch == 0:
        if req.rebalance_timeout_ms == -1:
            raise RequestError(ErrorCode.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
        if req.topic_partitions is None or req.topic_partitions:
            raise RequestError(ErrorCode.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
        regex = req.subscribed_topic_regex if version >= 1 else None
        if not req.subscribed_topic_names and regex is None:
            raise RequestError(ErrorCode.INVALID_REQUEST, "SubscribedTopicNames or SubscribedTopicRegex must be "
                                                          "set in first request.")
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if not req.member_id:
            raise RequestError(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
        if req.instance_id is None:
            raise RequestError(ErrorCode.INVALID_REQUEST, "InstanceId can't be null.")
    else:
        raise RequestError(ErrorCode.INVALID_REQUEST, "MemberEpoch is invalid.")
    if req.server_assignor is not None and req.server_assignor not in assignor_names:
        raise RequestError(ErrorCode.UNSUPPORTED_ASSIGNOR,
                           f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
                           f"{', '.join(assignor_names)}.")
    regex = req.subscribed_topic_regex if version >= 1 else None
    if regex is not None:
        try:
            compile_regex(regex)
        except ValueError as e:
            raise RequestError(ErrorCode.INVALID_REGULAR_EXPRESSION,
                               f"SubscribedTopicRegex {regex} is invalid: {e}") from None


def known_static_member(group: Any, member_id: str, instance_id: str) -> ConsumerGroupMember:
    """The member holding `instance_id`, which must be `member_id` (Kafka's
    throwIfStaticMemberIsUnknown): UNKNOWN_MEMBER_ID, else FENCED_INSTANCE_ID."""
    member = group.static_member(instance_id)
    if member is None:
        raise RequestError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown.")
    if member.member_id != member_id:
        raise RequestError(ErrorCode.FENCED_INSTANCE_ID,
                           f"Static member {member_id} with instance id {instance_id} was fenced by member "
                           f"{member.member_id}.")
    return member


def check_member_epoch(member: ConsumerGroupMember, epoch: int, owned: Any) -> None:
    """`owned`: the (topic id, partitions) the request says the member owns, or None."""
    if epoch > member.member_epoch:
        raise RequestError(ErrorCode.FENCED_MEMBER_EPOCH,
                           f"The consumer group member has a greater member epoch ({epoch}) than the one known by "
                           f"the group coordinator ({member.member_epoch}). The member must abandon all its "
                           "partitions and rejoin.")
    if epoch < member.member_epoch:
        # the response with the bumped epoch may have been lost: accept the previous
        # epoch while the member owns only what it still has
        if epoch != member.previous_member_epoch or not _subset(owned, member.assigned):
            raise RequestError(ErrorCode.FENCED_MEMBER_EPOCH,
                               f"The consumer group member has a smaller member epoch ({epoch}) than the one known "
                               f"by the group coordinator ({member.member_epoch}). The member must abandon all its "
                               "partitions and rejoin.")


def _subset(owned: Any, assigned: Assignment) -> bool:
    if owned is None:
        return False
    for topic_id, partitions in owned:
        have = assigned.get(topic_id)
        if have is None:
            if partitions:
                return False
            continue
        if any(p not in have for p in partitions):
            return False
    return True
