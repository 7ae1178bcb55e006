"""SCRAM credentials: AlterUserScramCredentials v0 and DescribeUserScramCredentials v0 with
Kafka's validation and messages (ScramControlManager, ScramImage.describe), kept durably in
`<log.dirs>/kcoord-scram-credentials.json` as Kafka's metadata records
(UserScramCredentialRecord / RemoveUserScramCredentialRecord; keys, never passwords).

`alter(request)` returns (records, results): the records are made durable, then replayed,
before the response is sent (server/handlers/scram_credentials.py)."""
from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from kcoord.protocol.errors import ErrorCode
from kcoord.server.security.scram import (
    MAX_ITERATIONS,
    ScramCredential,
    ScramMechanism,
    credential_from_salted,
)
from kcoord.server.security.state import CREDENTIALS_FILE
from kcoord.server.security.store import Record, RecordStore

# (user, mechanism) -> credential
Credentials = dict[tuple[str, ScramMechanism], ScramCredential]


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


def replay(state: Credentials, rec: Record) -> None:
    kind = rec["type"]
    mech = ScramMechanism.from_type(rec["mechanism"])
    if kind == "UserScramCredentialRecord":
        state[(rec["name"], mech)] = ScramCredential(
            base64.b64decode(rec["salt"]), base64.b64decode(rec["stored_key"]),
            base64.b64decode(rec["server_key"]), int(rec["iterations"]))
    elif kind == "RemoveUserScramCredentialRecord":
        state.pop((rec["name"], mech), None)
    else:
        raise ValueError(f"unknown record type {kind!r}")


def upsert_record(name: str, mech: ScramMechanism, cred: ScramCredential) -> Record:
    return {"type": "UserScramCredentialRecord", "name": name, "mechanism": int(mech), "salt": _b64(cred.salt),
            "stored_key": _b64(cred.stored_key), "server_key": _b64(cred.server_key), "iterations": cred.iterations}


def snapshot(state: Credentials) -> list[Record]:
    return [upsert_record(name, mech, cred) for (name, mech), cred in sorted(state.items())]


class CredentialStore(RecordStore[Credentials]):
    def __init__(self, log_dir: Path) -> None:
        super().__init__(log_dir / CREDENTIALS_FILE, {}, replay, snapshot)

    def lookup(self, mechanism: ScramMechanism, user: str) -> ScramCredential | None:
        return self.state.get((user, mechanism))


def _check_name_and_mechanism(name: str, mech: ScramMechanism) -> tuple[ErrorCode, str] | None:
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mech is ScramMechanism.UNKNOWN:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None


def alter(state: Credentials, request: Any) -> tuple[list[Record], list[tuple[str, ErrorCode, str | None]]]:
    """Kafka's ScramControlManager.alterCredentials: (records, [(user, error, message)]). A user
    altered twice in one request is refused with DUPLICATE_RESOURCE; deleting a credential that
    does not exist is RESOURCE_NOT_FOUND; iterations outside 4096..16384 are UNACCEPTABLE_CREDENTIAL."""
    deletions: dict[str, Any] = {}
    upserts: dict[str, Any] = {}
    errors: dict[str, tuple[ErrorCode, str]] = {}
    duplicate = (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
    for d in request.deletions:
        if d.name in errors:
            continue
        if deletions.pop(d.name, None) is not None:
            errors[d.name] = duplicate
            continue
        mech = ScramMechanism.from_type(d.mechanism)
        problem = _check_name_and_mechanism(d.name, mech)
        if problem is None and (d.name, mech) not in state:
            problem = (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
        if problem is not None:
            errors[d.name] = problem
        else:
            deletions[d.name] = d
    for u in request.upsertions:
        if u.name in errors:
            continue
        if deletions.pop(u.name, None) is not None or upserts.pop(u.name, None) is not None:
            errors[u.name] = duplicate
            continue
        mech = ScramMechanism.from_type(u.mechanism)
        problem = _check_name_and_mechanism(u.name, mech)
        if problem is None and u.iterations < mech.min_iterations:
            problem = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
        elif problem is None and u.iterations > MAX_ITERATIONS:
            problem = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
        if problem is not None:
            errors[u.name] = problem
        else:
            upserts[u.name] = u
    records: list[Record] = []
    results: list[tuple[str, ErrorCode, str | None]] = []
    for name, d in deletions.items():
        records.append({"type": "RemoveUserScramCredentialRecord", "name": name, "mechanism": int(d.mechanism)})
        results.append((name, ErrorCode.NONE, None))
    for name, u in upserts.items():
        mech = ScramMechanism.from_type(u.mechanism)
        cred = credential_from_salted(mech, bytes(u.salt), bytes(u.salted_password), u.iterations)
        records.append(upsert_record(name, mech, cred))
        results.append((name, ErrorCode.NONE, None))
    results.extend((name, code, msg) for name, (code, msg) in errors.items())
    return records, results


def describe(state: Credentials, users: list[str] | None) -> list[tuple[str, ErrorCode, str | None, list[tuple[int, int]]]]:
    """Kafka's ScramImage.describe: [(user, error, message, [(mechanism, iterations)])]; all
    users when `users` is null or empty."""
    if not users:
        wanted = {name: False for name, _ in sorted(state)}
    else:
        wanted = {}
        for name in users:
            wanted[name] = name in wanted  # True: asked for twice
    out = []
    for name, twice in wanted.items():
        if twice:
            out.append((name, ErrorCode.DUPLICATE_RESOURCE,
                        f"Cannot describe SCRAM credentials for the same user twice in a single request: {name}", []))
            continue
        infos = [(int(mech), cred.iterations) for (n, mech), cred in sorted(state.items()) if n == name]
        if infos:
            out.append((name, ErrorCode.NONE, None, infos))
        else:
            out.append((name, ErrorCode.RESOURCE_NOT_FOUND,
                        f"Attempt to describe a user credential that does not exist: {name}", []))
    return out
