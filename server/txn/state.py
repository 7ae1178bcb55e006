"""The transaction state machine as data: the TxnState enum (with the ids stored in
TransactionLogValue.transactionStatus), the ONE table of valid transitions (Kafka's
TransactionState.validPreviousStates), the function that checks a move along it, and, beside
it, what every transaction-coordinator request gets in every state.

PrepareEpochFence and Dead are never written: PrepareEpochFence is the pending state of an
InitProducerId (or a timeout) that must abort an ongoing transaction before it can bump the
epoch, and Dead the pending state of an expiring transactional id (its record is a tombstone).

REQUEST_OUTCOMES is documentation checked by tests (tests/unit/test_txn_state.py drives the
coordinator into each state and compares); the coordinator's code follows it
(kafka.coordinator.transaction.TransactionCoordinator, Kafka 4.x). END_TXN_V2 is what an
EndTxn of transactions v2 (KIP-890 part 2, EndTxn v5) does in each state, as data the
coordinator looks up.
"""
from __future__ import annotations

from enum import Enum


class TxnState(Enum):
    EMPTY = (0, "Empty")
    ONGOING = (1, "Ongoing")
    PREPARE_COMMIT = (2, "PrepareCommit")
    PREPARE_ABORT = (3, "PrepareAbort")
    COMPLETE_COMMIT = (4, "CompleteCommit")
    COMPLETE_ABORT = (5, "CompleteAbort")
    DEAD = (6, "Dead")
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence")

    @property
    def id(self) -> int:
        return self.value[0]

    @property
    def wire_name(self) -> str:
        """The name DescribeTransactions / ListTransactions use."""
        return self.value[1]

    def __str__(self) -> str:
        return self.value[1]

    @classmethod
    def from_id(cls, state_id: int) -> TxnState:
        return _BY_ID[state_id]

    @classmethod
    def from_name(cls, name: str) -> TxnState | None:
        return _BY_NAME.get(name)


_BY_ID = {s.id: s for s in TxnState}
_BY_NAME = {s.wire_name: s for s in TxnState}

E, ON, PC, PA, CC, CA, D, PF = (
    TxnState.EMPTY,
    TxnState.ONGOING,
    TxnState.PREPARE_COMMIT,
    TxnState.PREPARE_ABORT,
    TxnState.COMPLETE_COMMIT,
    TxnState.COMPLETE_ABORT,
    TxnState.DEAD,
    TxnState.PREPARE_EPOCH_FENCE,
)

# target state -> states it may be entered from.
VALID_PREVIOUS_STATES: dict[TxnState, frozenset[TxnState]] = {
    # InitProducerId (a new or bumped epoch; a new producer id when the epoch is exhausted).
    E: frozenset({E, CC, CA}),
    # AddPartitionsToTxn / AddOffsetsToTxn: a transaction starts or grows.
    ON: frozenset({ON, E, CC, CA}),
    # EndTxn(commit) of an ongoing transaction.
    PC: frozenset({ON}),
    # EndTxn(abort), or the abort that fences an ongoing transaction (InitProducerId, timeout);
    # transactions v2 (EndTxn v5) also aborts from Empty / Complete*: a client unsure of the
    # state aborts, and every EndTxn bumps the epoch.
    PA: frozenset({ON, PF, E, CC, CA}),
    # every marker of the transaction is written.
    CC: frozenset({PC}),
    CA: frozenset({PA}),
    # transactional.id.expiration.ms: only a finished transaction expires.
    D: frozenset({E, CA, CC}),
    # InitProducerId or the timeout task find the transaction still ongoing.
    PF: frozenset({ON}),
}

# States whose transactional id may expire (Kafka's isExpirationAllowed).
EXPIRATION_ALLOWED: frozenset[TxnState] = frozenset({E, CC, CA})
# States with a transaction whose partitions have (or will get) markers.
PREPARED: frozenset[TxnState] = frozenset({PC, PA})


class IllegalTxnTransition(RuntimeError):
    pass


def check_transition(transactional_id: str, current: TxnState, target: TxnState) -> TxnState:
    """Return `target` if the table allows current -> target, else raise."""
    if current not in VALID_PREVIOUS_STATES[target]:
        raise IllegalTxnTransition(
            f"TransactionalId {transactional_id}: {target} is not a valid next state of {current}")
    return target


# What each request gets in each state once the transactional id is valid (else INVALID_REQUEST),
# its partition is loaded (else COORDINATOR_LOAD_IN_PROGRESS) and, for the requests that name a
# producer, the producer id matches (else INVALID_PRODUCER_ID_MAPPING) and the epoch is the
# current one (else PRODUCER_FENCED; INVALID_PRODUCER_EPOCH for the versions before it existed).
# A transition in flight (a record being written, markers being written) answers
# CONCURRENT_TRANSACTIONS before the state is looked at; a prepared transaction always has its
# markers in flight (from the moment its Prepare record is durable, or its partition loaded),
# so every request meets CONCURRENT_TRANSACTIONS in PrepareCommit / PrepareAbort, as in Kafka.
# "-> X" = X is written, then answered.
REQUEST_OUTCOMES: dict[str, dict[TxnState, str]] = {
    "InitProducerId": {
        E: "-> Empty with epoch + 1 (a new producer id when the epoch is exhausted)",
        ON: "-> PrepareAbort with epoch + 1 (fences the old producer); markers; CONCURRENT_TRANSACTIONS",
        PC: "CONCURRENT_TRANSACTIONS",
        PA: "CONCURRENT_TRANSACTIONS",
        CC: "-> Empty with epoch + 1 (a new producer id when the epoch is exhausted)",
        CA: "-> Empty with epoch + 1 (a new producer id when the epoch is exhausted)",
    },
    "AddPartitionsToTxn": {
        E: "-> Ongoing with the partitions (transaction start time now)",
        ON: "partitions already in the transaction: NONE; otherwise -> Ongoing with them added",
        PC: "CONCURRENT_TRANSACTIONS",
        PA: "CONCURRENT_TRANSACTIONS",
        CC: "-> Ongoing with the partitions (transaction start time now)",
        CA: "-> Ongoing with the partitions (transaction start time now)",
    },
    "AddOffsetsToTxn": {
        E: "as AddPartitionsToTxn with the group's __consumer_offsets partition",
        ON: "as AddPartitionsToTxn with the group's __consumer_offsets partition",
        PC: "CONCURRENT_TRANSACTIONS",
        PA: "CONCURRENT_TRANSACTIONS",
        CC: "as AddPartitionsToTxn with the group's __consumer_offsets partition",
        CA: "as AddPartitionsToTxn with the group's __consumer_offsets partition",
    },
    "EndTxn(commit)": {
        E: "INVALID_TXN_STATE",
        ON: "-> PrepareCommit; COMMIT markers; -> CompleteCommit; NONE",
        PC: "CONCURRENT_TRANSACTIONS",
        PA: "CONCURRENT_TRANSACTIONS (markers in flight; INVALID_TXN_STATE without them)",
        CC: "NONE (a retry)",
        CA: "INVALID_TXN_STATE",
    },
    "EndTxn(abort)": {
        E: "INVALID_TXN_STATE",
        ON: "-> PrepareAbort; ABORT markers; -> CompleteAbort; NONE",
        PC: "CONCURRENT_TRANSACTIONS (markers in flight; INVALID_TXN_STATE without them)",
        PA: "CONCURRENT_TRANSACTIONS",
        CC: "INVALID_TXN_STATE",
        CA: "NONE (a retry)",
    },
    # Transactions v2 (EndTxn v5, the producer's current epoch): every EndTxn bumps the epoch
    # (the answer carries it; a new producer id when it is exhausted); see END_TXN_V2 for retries.
    "EndTxn v5(commit)": {
        E: "INVALID_TXN_STATE",
        ON: "-> PrepareCommit with epoch + 1; NONE with the new epoch; COMMIT markers; -> CompleteCommit",
        PC: "CONCURRENT_TRANSACTIONS",
        PA: "CONCURRENT_TRANSACTIONS (markers in flight; INVALID_TXN_STATE without them)",
        CC: "INVALID_TXN_STATE (a retry, with the epoch before the bump, gets NONE)",
        CA: "INVALID_TXN_STATE",
    },
    "EndTxn v5(abort)": {
        E: "-> PrepareAbort with epoch + 1 (no partitions); NONE with the new epoch; -> CompleteAbort",
        ON: "-> PrepareAbort with epoch + 1; NONE with the new epoch; ABORT markers; -> CompleteAbort",
        PC: "CONCURRENT_TRANSACTIONS (markers in flight; INVALID_TXN_STATE without them)",
        PA: "CONCURRENT_TRANSACTIONS",
        CC: "-> PrepareAbort with epoch + 1 (no partitions); NONE with the new epoch; -> CompleteAbort",
        CA: "-> PrepareAbort with epoch + 1 (no partitions); NONE with the new epoch; -> CompleteAbort",
    },
    # Transactions v2's implicit AddPartitions: a Produce v12 batch in a partition not yet in the
    # transaction, a TxnOffsetCommit v5 (the group's offsets partition); as AddPartitionsToTxn.
    "implicit add (v2)": {
        E: "-> Ongoing with the partitions (transaction start time now)",
        ON: "partitions already in the transaction: NONE; otherwise -> Ongoing with them added",
        PC: "CONCURRENT_TRANSACTIONS",
        PA: "CONCURRENT_TRANSACTIONS",
        CC: "-> Ongoing with the partitions (transaction start time now)",
        CA: "-> Ongoing with the partitions (transaction start time now)",
    },
    # The group coordinator asks before it writes transactional offsets, the partition leader
    # before it appends a producer's first transactional batch (KIP-890 verification).
    "verify partition": {
        E: "TRANSACTION_ABORTABLE (callers answer INVALID_TXN_STATE to older versions)",
        ON: "in the transaction: NONE; otherwise TRANSACTION_ABORTABLE",
        PC: "CONCURRENT_TRANSACTIONS",
        PA: "CONCURRENT_TRANSACTIONS",
        CC: "TRANSACTION_ABORTABLE",
        CA: "TRANSACTION_ABORTABLE",
    },
    "timeout check": {
        E: "nothing",
        ON: "started longer than its timeout ago: -> PrepareAbort with epoch + 1; markers; -> CompleteAbort",
        PC: "nothing (markers are being written)",
        PA: "nothing (markers are being written)",
        CC: "nothing",
        CA: "nothing",
    },
    "expiration check": {
        E: "idle longer than transactional.id.expiration.ms: tombstone, forgotten",
        ON: "nothing",
        PC: "nothing",
        PA: "nothing",
        CC: "idle longer than transactional.id.expiration.ms: tombstone, forgotten",
        CA: "idle longer than transactional.id.expiration.ms: tombstone, forgotten",
    },
}


# Transactions v2's EndTxn in each state (Kafka's TransactionCoordinator.endTransaction with
# TV_2), once the producer id and epoch are accepted: (state, commit, retry) -> what happens.
# A "retry" carries the epoch before the bump of an EndTxn that already succeeded (or, after a
# producer id rotation, the previous producer id with the exhausted epoch); "current" the
# id's current epoch. "bump": write Prepare* with epoch + 1; "none": answer NONE with the
# current producer id and epoch; an ErrorCode name: answer it.
#   state           abort retry   abort current   commit retry   commit current
END_TXN_V2: dict[tuple[TxnState, bool, bool], str] = {}
for _state, _row in {
    E: ("PRODUCER_FENCED", "bump", "PRODUCER_FENCED", "INVALID_TXN_STATE"),
    ON: ("PRODUCER_FENCED", "bump", "PRODUCER_FENCED", "bump"),
    PC: ("INVALID_TXN_STATE", "PRODUCER_FENCED", "CONCURRENT_TRANSACTIONS", "PRODUCER_FENCED"),
    PA: ("CONCURRENT_TRANSACTIONS", "PRODUCER_FENCED", "INVALID_TXN_STATE", "PRODUCER_FENCED"),
    CA: ("none", "bump", "INVALID_TXN_STATE", "INVALID_TXN_STATE"),
    CC: ("INVALID_TXN_STATE", "bump", "none", "INVALID_TXN_STATE"),
}.items():
    for (_commit, _retry), _outcome in zip([(False, True), (False, False), (True, True), (True, False)], _row,
                                           strict=True):
        END_TXN_V2[(_state, _commit, _retry)] = _outcome
