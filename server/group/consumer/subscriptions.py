"""What a consumer group subscribes to, against the broker's topics: the subscribed topics'
metadata (a ConsumerGroupPartitionMetadata record when it changed, which bumps the group epoch)
and the topics each subscription regex matches (a ConsumerGroupRegularExpression record). A new
regex is resolved at the end of the turn, after the turn's assignment, as Kafka resolves them
asynchronously: the member first gets its named topics, the matches later."""
from __future__ import annotations

import logging

from kcoord.protocol.coordinator_records import (
    ConsumerGroupPartitionMetadataKey,
    ConsumerGroupPartitionMetadataValue,
    ConsumerGroupRegularExpressionKey,
    ConsumerGroupRegularExpressionValue,
    CoordinatorRecord,
)
from kcoord.server.group.consumer.group import ConsumerGroup
from kcoord.server.group.consumer.records import epoch_bump
from kcoord.server.group.consumer.regex import compile_regex
from kcoord.server.group.consumer.topics import GroupTopics
from kcoord.server.group.consumer.writes import ConsumerGroupWrites
from kcoord.server.group.group_manager import GroupMetadataManager

log = logging.getLogger("kcoord.group")


class Subscriptions:
    def __init__(self, manager: GroupMetadataManager, writes: ConsumerGroupWrites, topics: GroupTopics) -> None:
        self.manager = manager
        self.clock = manager.clock
        self._groups = manager.groups_by_id
        self.writes = writes
        self.topics = topics

    def refresh_metadata(self, group: ConsumerGroup, records: list[CoordinatorRecord],
                         undo: list[CoordinatorRecord]) -> bool:
        """Recompute the subscribed topics' metadata; True (and a record) when it changed."""
        topics = self.topics.source
        if group.metadata_version != topics.changes:
            group.metadata_version = topics.changes
            for regex in list(group.regex_counts):
                if regex in group.regexes:  # new ones resolve after the turn (resolve_regexes_later)
                    self._maybe_resolve_regex(group, regex, records, undo, force=True)
        metadata = {}
        for name in sorted(group.subscribed_topic_names()):
            m = topics.metadata(name)
            if m is not None:
                metadata[name] = m
        if metadata == group.subscription_metadata:
            return False
        self.writes.apply(records, undo, [CoordinatorRecord(ConsumerGroupPartitionMetadataKey(group.group_id),
                                                            ConsumerGroupPartitionMetadataValue(metadata))])
        return True

    def resolve_regexes_later(self, group: ConsumerGroup) -> None:
        if group.regex_resolution_scheduled:
            return
        group.regex_resolution_scheduled = True

        def resolve() -> None:
            group.regex_resolution_scheduled = False
            if group.dead or self._groups.get(group.group_id) is not group:
                return
            records: list[CoordinatorRecord] = []
            undo: list[CoordinatorRecord] = []
            for regex in list(group.regex_counts):
                if regex not in group.regexes:
                    self._maybe_resolve_regex(group, regex, records, undo)
            if records and self.refresh_metadata(group, records, undo):
                self.writes.apply(records, undo, [epoch_bump(group)])
                log.info("[GroupId %s] Bumped group epoch to %d: a subscription regex resolved.",
                         group.group_id, group.group_epoch)
            self.writes.emit(records, undo)

        self.manager.at_end_of_turn(resolve)

    def _maybe_resolve_regex(self, group: ConsumerGroup, regex: str, records: list[CoordinatorRecord],
                             undo: list[CoordinatorRecord], force: bool = False) -> None:
        """The topics a subscription regex matches (full match, RE2 syntax, internal topics
        never), stored as a ConsumerGroupRegularExpression record when they changed."""
        topics = self.topics.source
        current = group.regexes.get(regex)
        if current is not None and not force and current.version == topics.changes:
            return
        pattern = compile_regex(regex)
        matched = tuple(sorted(n for n in topics.names() if not n.startswith("__") and pattern.fullmatch(n)))
        if current is not None and current.topics == matched:
            return
        self.writes.apply(records, undo, [CoordinatorRecord(
            ConsumerGroupRegularExpressionKey(group.group_id, regex),
            ConsumerGroupRegularExpressionValue(matched, topics.changes, self.clock.now_ms()))])
