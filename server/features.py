"""The features kcoord advertises in ApiVersions v3+ (KIP-584), as a Kafka 4.0 broker of a
freshly formatted cluster does: what it supports (metadata.version 3.3-IV3..4.0-IV3,
kraft.version, transaction.version, group.version, eligible.leader.replicas.version) and what
is finalized (metadata.version 4.0-IV3, group.version 1 and transaction.version at
kcoord.transaction.version, 2 by default; levels 0 are not listed, as Kafka lists none).

Clients read the finalized levels: Java kafka-clients 4.x use transactions v2 (Produce v12
adding partitions implicitly, EndTxn v5 bumping the epoch, TxnOffsetCommit v5) once
transaction.version >= 2 is finalized, and look again only when the finalized features epoch
grows: it is this process's start time, so a restart that changes a level is noticed.
"""
from __future__ import annotations

import time

METADATA_VERSION = "metadata.version"
TRANSACTION_VERSION = "transaction.version"

# name -> (min, max) supported level (Kafka 4.0's BrokerFeatures.defaultSupportedFeatures)
SUPPORTED: dict[str, tuple[int, int]] = {
    METADATA_VERSION: (7, 25),  # IBP_3_3_IV3 .. IBP_4_0_IV3
    "kraft.version": (0, 1),
    TRANSACTION_VERSION: (0, 2),
    "group.version": (0, 1),
    "eligible.leader.replicas.version": (0, 1),
}

FINALIZED_EPOCH = int(time.time() * 1000)


def finalized(transaction_version: int) -> dict[str, int]:
    """The finalized feature levels (0 levels left out, as Kafka's ApiVersionsResponse does)."""
    levels = {METADATA_VERSION: SUPPORTED[METADATA_VERSION][1], "group.version": 1,
              TRANSACTION_VERSION: transaction_version}
    return {name: level for name, level in levels.items() if level != 0}


def supported(request_version: int) -> dict[str, tuple[int, int]]:
    """ApiVersions below v4 leave out features whose minimum level is 0: some older clients
    cannot read them (KAFKA-17492)."""
    if request_version >= 4:
        return dict(SUPPORTED)
    return {name: r for name, r in SUPPORTED.items() if r[0] != 0}
