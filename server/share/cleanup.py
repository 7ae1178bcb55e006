"""Deleting share-partition state that has lost its owner, as Kafka's DeleteShareGroupState:
tombstones in __share_group_state for every share partition of a deleted share group (written
before the group's own records are deleted, so a recreated group starts fresh and never finds
its predecessor's state), and for every share partition of a deleted topic, in every group.

The share manager's live partitions for those keys are dropped once the tombstones are durable.
Nothing is done (and no share manager is built) when no share state was ever stored."""
from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import Any

from kcoord.protocol.errors import ErrorCode


async def _delete(manager: Any, keys: list[tuple[str, uuid.UUID, int]]) -> ErrorCode | None:
    records = [r for k in keys for r in manager.shard.tombstones(k)]
    if not records:
        return None
    code = await manager._write(records)
    if code is None:
        for k in keys:
            manager.partitions.pop(k, None)
    return code


async def delete_groups_state(manager: Any, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
    """Tombstones for every share partition of each group; the groups whose write failed, with
    the error (their group must not be deleted then)."""
    await manager.ready()
    failed: dict[str, ErrorCode] = {}
    for gid in group_ids:
        # the partitions this node's coordinator holds, and those the group initialized (on a
        # cluster their state may be at other nodes' share coordinators: through the persister)
        keys = {k for k in manager.shard.states if k[0] == gid}
        keys |= {(gid, t, p) for t, p in manager.state_partitions(gid)}
        codes = await manager.persister.delete(sorted(keys, key=lambda k: (str(k[1]), k[2])))
        code = next((c for c in codes.values() if c is not None), None)
        if code is not None:
            failed[gid] = code
        else:
            for k in keys:
                manager.drop(k)
    return failed


async def delete_topic_state(manager: Any, topic_id: uuid.UUID) -> ErrorCode | None:
    """Tombstones for the share partitions of a deleted topic, in every share group."""
    await manager.ready()
    return await _delete(manager, [k for k in manager.shard.states if k[1] == topic_id])


async def before_delete_groups(coordinator: Any, share_state: Callable[[], Any], group_ids: list[str]
                               ) -> dict[str, ErrorCode]:
    """DeleteGroups, first step for share groups (Kafka's GroupCoordinatorService deletes the
    share state before the group): the empty share groups among `group_ids` lose their share
    state. `share_state`: the share manager when share state exists, else None (the
    composition root's share_state, server/node.py). Returns the groups whose state could not
    be deleted, with the error to answer."""
    share_groups = [g for g in group_ids if coordinator.share.members(g) == 0]
    if not share_groups:
        return {}
    manager = share_state()
    if manager is None:
        return {}
    return await delete_groups_state(manager, share_groups)


async def after_topic_deleted(share_state: Callable[[], Any], topic_id: uuid.UUID) -> None:
    """Topic deletion's step for share state; raises KafkaError when the write failed (the
    deletion is then retried, as its other steps are)."""
    from kcoord.protocol.errors import KafkaError

    manager = share_state()
    if manager is None:
        return
    code = await delete_topic_state(manager, topic_id)
    if code is not None:
        raise KafkaError(code, f"deleting the share state of topic {topic_id} failed: {code.name}")
