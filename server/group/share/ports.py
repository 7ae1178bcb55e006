"""What the share-partition side (ShareFetch / ShareAcknowledge, server/share/) sees of the share
group coordinator, and what it gives it: a member's assignment, and a call when a member leaves
the group (it left, its session expired, or it was fenced), once that is durable."""
from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Protocol

# (group id, member id) -> None: the member is gone; what it had acquired goes back
MemberLeft = Callable[[str, str], None]


class ShareGroupMembership(Protocol):
    def assignment(self, group_id: str, member_id: str) -> set[tuple[uuid.UUID, int]] | None:
        """The (topic id, partition) pairs the member is assigned now; None when `member_id` is
        not a member of the share group `group_id` (or there is no such share group)."""
        ...

    def members(self, group_id: str) -> int | None:
        """How many members the share group `group_id` has; None when there is no such share group
        (the share offsets APIs refuse to change a group with members, NON_EMPTY_GROUP)."""
        ...

    def state_partitions(self, group_id: str) -> set[tuple[uuid.UUID, int]]:
        """The (topic id, partition) pairs whose share state the group initialized (on a
        cluster their state may be at other nodes' share coordinators)."""
        ...
