"""DeleteTopics v0-v6 (v6: by name or by topic id), as Kafka's controller answers it.

- delete.topic.enable=false: every topic answers TOPIC_DELETION_DISABLED (v3+) or
  INVALID_REQUEST (v0-v2).
- v6 entries naming both a name and an id, or neither: INVALID_REQUEST; a name or id given
  twice: INVALID_REQUEST ("Duplicate topic name." / "Duplicate topic id."); a name whose id
  was also given: INVALID_REQUEST.
- An unknown name: UNKNOWN_TOPIC_OR_PARTITION; an unknown id: UNKNOWN_TOPIC_ID.
- Internal topics (`__consumer_offsets`) cannot be deleted here: INVALID_TOPIC_EXCEPTION, as
  Kafka refuses DeleteRecords and Produce on them (Kafka's controller would delete one and
  lose every group's offsets with it).
- The deletion itself (server/topic_deletion.py) is answered once the topic's files and
  committed offsets are gone, so its name can be created again at once with a new id.
  Refusals come first, then the deletions (Kafka shuffles its results; order means nothing).
"""
from __future__ import annotations

import logging
import uuid
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kafka.protocol.admin.topics import DeleteTopicsResponse

from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.server.context import RequestContext
from kcoord.server.deferred import of_coroutine, wait
from kcoord.server.quotas.mutation import mutation_quota
from kcoord.server.topics import Topic

if TYPE_CHECKING:
    from kcoord.server.config import Config
    from kcoord.server.quotas.manager import QuotaManager
    from kcoord.server.topic_deletion import TopicDeleter
    from kcoord.server.topics import TopicRegistry

log = logging.getLogger("kcoord.topics")

Result = DeleteTopicsResponse.DeletableTopicResult
ZERO_UUID = uuid.UUID(int=0)
# Kafka's default messages (Errors.*.message()), which its controller sends for these two
UNKNOWN_TOPIC_MESSAGE = "This server does not host this topic-partition."
UNKNOWN_TOPIC_ID_MESSAGE = "This server does not host this topic ID."


def _result(name: str | None, topic_id: uuid.UUID | None, code: ErrorCode, message: str | None = None) -> Any:
    return Result(name=name, topic_id=topic_id or ZERO_UUID, error_code=code, error_message=message)


def _requested(req: Any, version: int) -> list[tuple[str | None, uuid.UUID | None]]:
    if version >= 6:
        return [(t.name, t.topic_id if t.topic_id and t.topic_id != ZERO_UUID else None) for t in req.topics]
    return [(name, None) for name in req.topic_names]


class DeleteTopicsApi:
    """The handlers of delete_topics.py, built by the composition root (server/node.py) with the parts they use."""

    def __init__(self, topics: TopicRegistry, config: Config, quotas: QuotaManager, deleter: TopicDeleter,
                 cluster: Callable[[], Any]) -> None:
        self.topics = topics
        self.cluster = cluster  # the node's ClusterNode on a cluster node, else None (server/cluster/)
        self.config = config
        self.quotas = quotas
        self.deleter = deleter

    def handle_delete_topics(self, ctx: RequestContext, req: Any, version: int) -> Any:
        return of_coroutine(self._delete_topics(ctx, req, version), "DeleteTopics")

    async def _delete_topics(self, ctx: RequestContext, req: Any, version: int) -> Any:
        wanted = _requested(req, version)
        if not self.config["delete.topic.enable"]:
            code = ErrorCode.INVALID_REQUEST if version < 3 else ErrorCode.TOPIC_DELETION_DISABLED
            return DeleteTopicsResponse(version=version, throttle_time_ms=0,
                                        responses=[_result(n, i, code) for n, i in wanted])
        names = Counter(n for n, i in wanted if n is not None and i is None)
        ids = Counter(i for n, i in wanted if n is None and i is not None)
        results: list[Any] = []
        for name, topic_id in wanted:
            if name is not None and topic_id is not None:
                results.append(_result(name, topic_id, ErrorCode.INVALID_REQUEST,
                                       "You may not specify both topic name and topic id."))
            elif name is None and topic_id is None:
                results.append(_result(None, None, ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified."))
        results += [_result(n, None, ErrorCode.INVALID_REQUEST, "Duplicate topic name.") for n, c in names.items() if c > 1]
        results += [_result(None, i, ErrorCode.INVALID_REQUEST, "Duplicate topic id.") for i, c in ids.items() if c > 1]
        # Kafka resolves the ids, then the names; a name whose id was also given deletes nothing
        # and the id's entry gets no answer.
        todo: dict[uuid.UUID, Topic] = {}
        by_id, by_name = self.topics.by_id.get, self.topics.get
        cluster = self.cluster()
        if cluster is not None:  # a cluster node: the cluster's topics (server/cluster/)
            from kcoord.server.cluster.answers import as_topic

            by_id, by_name = (lambda i: as_topic(cluster.cache.by_id(i))), (lambda n: as_topic(cluster.topic(n)))
        for topic_id in (i for i, c in ids.items() if c == 1):
            topic = by_id(topic_id)
            if topic is None:
                results.append(_result(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_ID_MESSAGE))
            else:
                todo[topic_id] = topic
        for name in (n for n, c in names.items() if c == 1):
            topic = by_name(name)
            if topic is None:
                results.append(_result(name, None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_MESSAGE))
            elif topic.topic_id in todo or ids[topic.topic_id] > 1:
                todo.pop(topic.topic_id, None)
                results.append(_result(name, topic.topic_id, ErrorCode.INVALID_REQUEST,
                                       "The provided topic name maps to an ID that was already supplied."))
            else:
                todo[topic.topic_id] = topic
        quota = mutation_quota(self.quotas, ctx, strict=version >= 5)  # controller_mutation_rate, None without one
        for topic in todo.values():
            if quota is not None and not topic.internal:
                try:
                    quota.record(topic.partitions)
                except KafkaError as e:
                    results.append(_result(topic.name, topic.topic_id, e.code, e.message))
                    continue
            results.append(await (self._delete(topic) if cluster is None
                                  else _delete_in_cluster(cluster, topic, req.timeout_ms)))
        throttle = quota.finish(ctx) if quota is not None else 0
        return DeleteTopicsResponse(version=version, throttle_time_ms=throttle, responses=results)

    async def _delete(self, topic: Topic) -> Any:
        if topic.internal:
            return _result(topic.name, topic.topic_id, ErrorCode.INVALID_TOPIC_EXCEPTION,
                           f"Topic {topic.name} is an internal topic and cannot be deleted")
        if self.topics.get(topic.name) is not topic:  # deleted by a request that ran meanwhile
            return _result(topic.name, topic.topic_id, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_MESSAGE)
        try:
            await wait(self.deleter.delete_topic(topic))
        except OSError as e:
            log.error("Could not delete topic %s: %s", topic.name, e)
            return _result(topic.name, topic.topic_id, ErrorCode.KAFKA_STORAGE_ERROR, str(e))
        return _result(topic.name, topic.topic_id, ErrorCode.NONE)


async def _delete_in_cluster(cluster: Any, topic: Topic, timeout_ms: int) -> Any:
    """ZooKeeper mode: /admin/delete_topics/T, then wait (up to the request's timeout) until the
    controller has deleted it (REQUEST_TIMED_OUT otherwise; the deletion goes on)."""
    if topic.internal:
        return _result(topic.name, topic.topic_id, ErrorCode.INVALID_TOPIC_EXCEPTION,
                       f"Topic {topic.name} is an internal topic and cannot be deleted")
    await cluster.delete_topic(topic.name)
    if not await cluster.wait_deleted(topic.name, max(0, timeout_ms) / 1000):
        return _result(topic.name, topic.topic_id, ErrorCode.REQUEST_TIMED_OUT,
                       "The request timed out before the deletion finished.")
    return _result(topic.name, topic.topic_id, ErrorCode.NONE)
