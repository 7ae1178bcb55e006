"""DescribeGroups (v0-v5), ListGroups (v0-v5) and DeleteGroups (v0-v2)."""
from __future__ import annotations

from typing import Any

from protocol.coordinator_records import CoordinatorRecord, GroupKey, OffsetKey
from protocol.errors import ErrorCode
from server.group.base import CoordinatorBase, log
from server.group.group import GroupMetadata
from server.group.responses import (
    AUTHORIZED_OPERATIONS_OMITTED,
    GROUP_AUTHORIZED_OPERATIONS,
    delete_groups_response,
    describe_response,
    described_group,
    list_response,
)
from server.group.result import CoordinatorResult
from server.group.state import GroupState


class AdminMixin(CoordinatorBase):
    def describe_groups(self, req: Any, version: int) -> CoordinatorResult:
        ops = GROUP_AUTHORIZED_OPERATIONS if version >= 3 and req.include_authorized_operations else \
            AUTHORIZED_OPERATIONS_OMITTED
        out = []
        for gid in req.groups:
            err = self._validate(gid, "describe_groups")
            if err is not None:
                out.append(described_group(gid, err, "", "", "", [], ops))
                continue
            group = self._groups.get(gid)
            if group is None:
                out.append(described_group(gid, ErrorCode.NONE, str(GroupState.DEAD), "", "", [], ops))
                continue
            if group.state is GroupState.STABLE:
                proto = group.protocol_name or ""
                members = [
                    (mid, m.group_instance_id, m.client_id, m.client_host, m.metadata(proto), m.assignment)
                    for mid, m in group.members.items()
                ]
            else:
                # metadata and assignments only mean something once the group is Stable
                proto = ""
                members = [
                    (mid, m.group_instance_id, m.client_id, m.client_host, b"", b"")
                    for mid, m in group.members.items()
                ]
            out.append(described_group(
                gid, ErrorCode.NONE, str(group.state), group.protocol_type or "", proto, members, ops
            ))
        return CoordinatorResult(response=describe_response(version, out))

    def list_groups(self, req: Any, version: int) -> CoordinatorResult:
        states = {s.lower() for s in (req.states_filter or [])} if version >= 4 else set()
        types = {t.lower() for t in (req.types_filter or [])} if version >= 5 else set()
        err = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self._loading else ErrorCode.NONE
        rows = []
        if not types or "classic" in types:  # every group here is a classic group
            for g in self._groups.values():
                if self._is_loading(g.group_id):
                    continue
                if states and str(g.state).lower() not in states:
                    continue
                rows.append((g.group_id, g.protocol_type or "", str(g.state)))
        return CoordinatorResult(response=list_response(version, err, rows))

    def delete_groups(self, req: Any, version: int) -> CoordinatorResult:
        """Records may span several groups (contiguous per group): route each record by
        partition_of(record.key.group)."""
        results: dict[str, ErrorCode] = {}
        deleted: list[GroupMetadata] = []
        for gid in dict.fromkeys(req.groups_names):
            err = self._validate(gid, "delete_groups")
            if err is not None:
                results[gid] = err
                continue
            group = self._groups.get(gid)
            if group is None or group.state is GroupState.DEAD:
                results[gid] = ErrorCode.GROUP_ID_NOT_FOUND
            elif group.state is GroupState.EMPTY:
                self._mark_dead(group, ErrorCode.COORDINATOR_NOT_AVAILABLE)
                deleted.append(group)
                results[gid] = ErrorCode.NONE
            else:
                results[gid] = ErrorCode.NON_EMPTY_GROUP
        if not deleted:
            return CoordinatorResult(response=delete_groups_response(version, list(results.items())))
        records: list[CoordinatorRecord] = []
        n_offsets = 0
        for g in deleted:
            keys = g.offsets.keys()
            n_offsets += len(keys)
            records.extend(CoordinatorRecord(OffsetKey(g.group_id, t, p), None) for t, p in keys)
            records.append(CoordinatorRecord(GroupKey(g.group_id), None))
        log.info("The following groups were deleted: %s. A total of %d offsets were removed.",
                 ", ".join(g.group_id for g in deleted), n_offsets)

        def on_appended(error: ErrorCode | None) -> Any:
            if error is not None:
                for g in deleted:
                    self._revive(g)
                    results[g.group_id] = error
            return delete_groups_response(version, list(results.items()))

        return CoordinatorResult(records=records, on_appended=on_appended)
