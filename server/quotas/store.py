"""The client quotas, kept durably as Kafka's controller keeps them: ClientQuotaRecords (set a
key of an entity, or remove it) replayed into the in-memory state, in
`<log.dirs>/kcoord-client-quotas.json` (server/security/store.py's RecordStore: the file is
written and fsynced before the change is applied or answered).

`alter(state, entries)` is ClientQuotaControlManager.alterClientQuotas: per entry an error or
the records it makes (none for a value that does not change); nothing is written for an entry
with an error, and nothing at all under validate_only.
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from kcoord.protocol.errors import ErrorCode
from kcoord.server.quotas.entities import (
    Entity,
    QuotaError,
    entity_text,
    keys_for,
    validate_entity,
    validate_value,
)
from kcoord.server.security.store import Record, RecordStore

QUOTAS_FILE = "kcoord-client-quotas.json"

# entity -> {key: value}
Quotas = dict[Entity, dict[str, float]]

# one AlterClientQuotas entry: its entity pairs, and (key, value or None to remove) ops
Alteration = tuple[list[tuple[str, "str | None"]], list[tuple[str, "float | None"]]]
Result = tuple[list[tuple[str, "str | None"]], ErrorCode, "str | None"]


def replay(state: Quotas, rec: Record) -> None:
    if rec.get("type") != "ClientQuotaRecord":
        raise ValueError(f"unknown record type {rec.get('type')!r}")
    entity: Entity = tuple(sorted((str(t), None if n is None else str(n)) for t, n in rec["entity"]))
    if rec.get("remove"):
        values = state.get(entity)
        if values is not None:
            values.pop(rec["key"], None)
            if not values:
                del state[entity]
    else:
        state.setdefault(entity, {})[str(rec["key"])] = float(rec["value"])


def _record(entity: Entity, key: str, value: float | None) -> Record:
    rec: Record = {"type": "ClientQuotaRecord", "entity": [list(p) for p in entity], "key": key}
    if value is None:
        rec["remove"] = True
    else:
        rec["value"] = value
    return rec


def snapshot(state: Quotas) -> list[Record]:
    return [_record(entity, key, value) for entity, values in sorted(state.items(), key=lambda e: repr(e[0]))
            for key, value in sorted(values.items())]


class QuotaStore(RecordStore[Quotas]):
    def __init__(self, log_dir: Path) -> None:
        super().__init__(log_dir / QUOTAS_FILE, {}, replay, snapshot)


def alter(state: Quotas, entries: Iterable[Alteration]) -> tuple[list[Record], list[Result]]:
    records: list[Record] = []
    results: dict[Entity | int, Result] = {}
    for i, (pairs, ops) in enumerate(entries):
        try:
            entity = validate_entity(pairs)
        except QuotaError as e:
            results[i] = (pairs, e.code, e.message)  # an invalid entity is answered as sent
            continue
        if entity in results:
            results[-i - 1] = (pairs, ErrorCode.INVALID_REQUEST, f"Ignoring duplicate entity {entity_text(entity)}")
            continue
        changes: dict[str, float | None] = {}
        duplicate = False
        for key, value in ops:
            if key in changes:
                duplicate = True
            changes[key] = value
        if duplicate:  # Kafka reports it as a duplicate entity (its result map already holds one)
            results[entity] = (pairs, ErrorCode.INVALID_REQUEST, f"Ignoring duplicate entity {entity_text(entity)}")
            continue
        try:
            keys = keys_for(entity)
            current = state.get(entity, {})
            new: list[Record] = []
            for key, value in changes.items():
                if value is None:
                    if key in current:
                        new.append(_record(entity, key, None))
                    continue
                validate_value(keys, key, value)
                if current.get(key) != value:
                    new.append(_record(entity, key, value))
        except QuotaError as e:
            results[entity] = (pairs, e.code, e.message)
            continue
        records.extend(new)
        results[entity] = (pairs, ErrorCode.NONE, None)
    return records, list(results.values())


def describe(state: Quotas, matches) -> list[tuple[Entity, dict[str, float]]]:  # noqa: ANN001 - Filter.matches
    return [(entity, dict(values)) for entity, values in state.items() if matches(entity)]
