"""The broker's topics as the consumer groups read them: the metadata of what a group subscribes
to, the names a subscription regex matches, and topic ids back to names. One GroupTopics is
shared by the consumer-group units and the migration; the coordinator points it at the broker's
topic registry (GroupCoordinator.set_topics)."""
from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Protocol

from kcoord.protocol.coordinator_records import TopicMetadata


class TopicSource(Protocol):
    """What the coordinator needs of the broker's topics."""

    changes: int  # bumped on every topic creation, deletion or partition change

    def metadata(self, name: str) -> TopicMetadata | None: ...

    def names(self) -> Iterable[str]: ...

    def name_of(self, topic_id: uuid.UUID) -> str | None: ...


class NoTopics:
    changes = 0

    def metadata(self, name: str) -> TopicMetadata | None:
        return None

    def names(self) -> Iterable[str]:
        return ()

    def name_of(self, topic_id: uuid.UUID) -> str | None:
        return None


class GroupTopics:
    """The one reference to the topic source every reader shares (`source`)."""

    __slots__ = ("source",)

    def __init__(self, source: TopicSource | None = None) -> None:
        self.source: TopicSource = NoTopics() if source is None else source
