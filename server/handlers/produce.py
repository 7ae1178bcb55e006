"""Produce v3-v12: validate each partition's record batch, assign offsets in the log, answer.
(v12 differs only for transactions v2: its transactional batches add their partitions to the
transaction, server/handlers/produce_txn.py.)

- acks 0: nothing is sent back; on any partition error the connection is closed (as Kafka
  does, so the producer refreshes metadata). acks 1: answered after the append; acks -1 on a
  single node too. Other values: INVALID_REQUIRED_ACKS.
- A replicated partition (plog.replica, server/replication/): only its leader appends
  (NOT_LEADER_OR_FOLLOWER elsewhere), stamping its leader epoch into the batch; with acks -1
  an ISR below the topic's min.insync.replicas refuses the append (NOT_ENOUGH_REPLICAS), and
  the answer waits until every ISR member has the records (server/replication/
  delayed_produce.py: NOT_ENOUGH_REPLICAS_AFTER_APPEND, REQUEST_TIMED_OUT after timeout_ms).
- Flushing follows Kafka (server/log_flush.py): a partition is fsynced before the answer only
  when its topic's flush.messages (log.flush.interval.messages) records are unflushed (Kafka's
  default, Long.MAX: never; flush.messages=1: before every acknowledgement), through the group
  commit and bounded by the request's timeout_ms (REQUEST_TIMED_OUT); with acks 0 that flush
  is started and not waited for.
- Validation, in Kafka's order and with its codes: UNKNOWN_TOPIC_OR_PARTITION; v3+ wants
  exactly one magic-2 batch per partition (INVALID_RECORD), no zstd below v7
  (UNSUPPORTED_COMPRESSION_TYPE); client writes to internal topics are refused with
  INVALID_TOPIC_EXCEPTION; baseOffset must be 0 (INVALID_RECORD); batch size over the topic's
  max.message.bytes: MESSAGE_TOO_LARGE; CRC: CORRUPT_MESSAGE; inconsistent offsets/counts, control
  batches, a producer id without a sequence: INVALID_RECORD; over segment.bytes:
  RECORD_LIST_TOO_LARGE; keyless records on a compacted topic: INVALID_RECORD; timestamps outside
  message.timestamp.before/after.max.ms (when configured, CreateTime): INVALID_TIMESTAMP.
- Transactional batches: a request carrying them without a transactional id is answered
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED as a whole, as Kafka does; the rest (one producer per
  request, KIP-890 verification with the transaction coordinator, the partition's open
  transactions) is server/handlers/produce_txn.py.
- Idempotent producers: sequence checks per partition (server/producers.py); a duplicate is
  answered with its original offsets and is not appended again.
- Compressed batches are stored exactly as they arrive (compression.type=producer; a topic with
  another compression.type is not recompressed). LogAppendTime topics (message.timestamp.type,
  or the broker's log.message.timestamp.type) get the broker time stamped into each batch and
  the response carries log_append_time_ms.
"""
from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from aiokafka.errors import UnsupportedCodecError

from kcoord.protocol.data_fastpath import ProduceResponseData
from kcoord.protocol.errors import ErrorCode, KafkaError, error_code_of
from kcoord.server.context import RequestContext
from kcoord.server.data_plane import LEADER_EPOCH, not_leader, timestamp_bounds_of
from kcoord.server.deferred import of_coroutine, then, wait
from kcoord.server.handlers import produce_txn
from kcoord.server.handlers.produce_txn import ProduceTxn
from kcoord.server.handlers.registry import NO_RESPONSE
from kcoord.server.log_flush import flush_rolled, needs_flush
from kcoord.server.record_validation import validate_records
from kcoord.server.replication.delayed_produce import Waiting, watch
from kcoord.storage.batch import (
    CorruptBatchError,
    client_batch_problem,
    crc_ok,
    split_batches,
)
from kcoord.storage.flusher import group_commit, sync

if TYPE_CHECKING:
    from kcoord.server.clock import Clock
    from kcoord.server.config import Config
    from kcoord.server.config_layers import BrokerConfigs
    from kcoord.server.data_plane import DataPlane
    from kcoord.server.lazy import Lazy
    from kcoord.server.topics import TopicRegistry
    from kcoord.server.txn.service import TxnService
    from kcoord.storage.log_manager import LogManager

log = logging.getLogger("kcoord.produce")

_MAGIC_OFFSET = 16
_ZSTD = 4
_MAX_COMPRESSION = 4


class _Result:
    __slots__ = ("error", "message", "base_offset", "last_offset", "log_append_time", "log_start_offset",
                 "record_errors", "plog", "flush", "min_isr")

    def __init__(self, error: ErrorCode = ErrorCode.NONE, message: str | None = None) -> None:
        self.error = error
        self.message = message
        self.base_offset = -1
        self.last_offset = -1
        self.log_append_time = -1
        self.log_start_offset = -1
        self.record_errors: list[tuple[int, str | None]] = []
        self.plog = None
        self.flush = False  # flush.messages reached: fsynced before the answer
        self.min_isr = 1  # min.insync.replicas of a replicated partition's topic (acks=all)


def _records_problem(records: Any, version: int) -> KafkaError | None:
    """ProduceRequest.validateRecords: v3+ carries exactly one magic-2 batch per partition."""
    if not records or len(records) <= _MAGIC_OFFSET:
        return KafkaError(ErrorCode.INVALID_RECORD,
                          f"Produce requests with version {version} must have at least one record batch per partition")
    magic = records[_MAGIC_OFFSET]
    if magic != 2:
        return KafkaError(ErrorCode.INVALID_RECORD,
                          f"Produce requests with version {version} are only allowed to contain record batches "
                          f"with magic version 2 (got magic {magic})")
    return None


def _compacted(values: dict[str, Any]) -> bool:
    return any(p.lower() == "compact" for p in values["cleanup.policy"])


def _response(version: int, req: Any, results: list[list[_Result]]) -> ProduceResponseData:
    """The response (encoded by protocol/data_fastpath.py)."""
    return ProduceResponseData(version, [
        (t.name, [(p.index, r.error, r.base_offset, r.log_append_time, r.log_start_offset, r.record_errors,
                   r.message if r.error else None) for p, r in zip(t.partition_data, rs, strict=True)])
        for t, rs in zip(req.topic_data, results, strict=True)])


def _whole_request_error(version: int, req: Any, code: ErrorCode, message: str | None = None) -> Any:
    return _response(version, req, [[_Result(code, message) for _ in t.partition_data] for t in req.topic_data])


def _is_transactional(records: Any) -> bool:
    # attributes (int16 at byte 21), bit 4; only the first batch counts, as in Kafka.
    return bool(records) and len(records) >= 23 and records[_MAGIC_OFFSET] == 2 and bool(records[22] & 0x10)


async def _await_durable(version: int, req: Any, results: list[list[_Result]], timeout_ms: int) -> Any:
    """The response once every appended offset that must be flushed (acks=all, flush.messages)
    is durable, each partition answered with its fdatasync's error, or REQUEST_TIMED_OUT
    once `timeout_ms` passed."""
    waits: dict[int, tuple[Any, int]] = {}  # id(plog) -> (plog, highest offset to sync)
    for rs in results:
        for r in rs:
            if r.error == ErrorCode.NONE and r.flush:
                prev = waits.get(id(r.plog))
                if prev is None or prev[1] < r.last_offset:
                    waits[id(r.plog)] = (r.plog, r.last_offset)
    outcome: dict[int, ErrorCode] = {}

    async def one(key: int, plog: Any, offset: int) -> None:
        try:
            await sync(plog, offset)
        except Exception as e:  # noqa: BLE001 - reported per partition
            if not isinstance(e, OSError):  # an I/O error was logged once by the failure channel
                log.error("fdatasync of %s failed: %r", plog.path, e)
            outcome[key] = error_code_of(e)

    tasks = [asyncio.ensure_future(one(k, plog, off)) for k, (plog, off) in waits.items()]
    if tasks:
        _, pending = await asyncio.wait(tasks, timeout=max(timeout_ms, 0) / 1000.0)
        for task in pending:
            task.cancel()
        for k, (plog, off) in waits.items():
            if k not in outcome and plog.durable_offset <= off:
                outcome[k] = ErrorCode.REQUEST_TIMED_OUT
    for rs in results:
        for r in rs:
            if r.error == ErrorCode.NONE and r.flush:
                code = outcome.get(id(r.plog))
                if code is not None:
                    r.error, r.message = code, f"{code.name} while waiting for the append to be durable"
    return _response(version, req, results)


class ProduceApi:
    """Produce's handler, built by the composition root (server/node.py) with the parts it
    uses: the topic registry and each topic's effective configs, the logs, the data plane
    (producer state, long polls to wake), the clock, and through ProduceTxn the transaction
    coordinator."""

    def __init__(self, config: Config, clock: Clock, topics: TopicRegistry, configs: BrokerConfigs,
                 logs: LogManager, data_plane: DataPlane, txn: Lazy[TxnService], cluster: Callable[[], Any],
                 replicas: Callable[[], Any]) -> None:
        self.clock = clock
        # a cluster node's ClusterNode and replica manager, else None (server/cluster/, server/replication/)
        self.cluster = cluster
        self.replicas = replicas
        self.topics = topics
        self.configs = configs
        self.logs = logs
        self.data_plane = data_plane
        self.txns = ProduceTxn(config["transaction.partition.verification.enable"], clock, topics, logs,
                               data_plane, txn, cluster)

    def handle_produce(self, ctx: RequestContext, req: Any, version: int) -> Any:
        acks = req.acks
        if any(_is_transactional(p.records) for t in req.topic_data for p in t.partition_data):
            code = None
            if req.transactional_id is None:
                code, msg = (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                             "transactional records without a transactional id")
            elif len(produce_txn.transactional_producers(req)) > 1:
                code, msg = (ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                             "Transactional records contained more than one producer ID")
            if code is not None:
                log.info("Refusing transactional produce from client %s: %s", ctx.client_id, msg)
                return _close_or(acks, ctx, _whole_request_error(version, req, code, msg), code)
        if acks not in (-1, 0, 1):
            return _whole_request_error(version, req, ErrorCode.INVALID_REQUIRED_ACKS)
        if req.transactional_id is not None and self.cluster() is not None:
            asking = self.txns.remote_checks(req, version)
            if asking is not None:  # another node coordinates the id: it verifies or adds first
                return then(asking, lambda added: self._append_after_adds(req, version, acks, added))
        if version >= 12 and req.transactional_id is not None:
            adding = self.txns.implicit_adds(req)
            if adding is not None:  # transactions v2: the partitions join the transaction first
                return then(adding, lambda added: self._append_after_adds(req, version, acks, added))
        return self._append_all(req, version, acks, None)

    def _append_after_adds(self, req: Any, version: int, acks: int, added: dict[tuple[str, int], ErrorCode]) -> Any:
        from kcoord.server.dispatch import CloseConnection

        try:
            return self._append_all(req, version, acks, added)
        except CloseConnection as e:  # acks=0 with an error: the dispatcher closes the connection
            return e

    def _append_all(self, req: Any, version: int, acks: int, added: dict[tuple[str, int], ErrorCode] | None) -> Any:
        tid = req.transactional_id
        results = [[self._append_partition(t.name, p.index, p.records, version, tid, added, acks)
                    for p in t.partition_data] for t in req.topic_data]
        if acks == 0:
            errors = [r.error.name for rs in results for r in rs if r.error]
            if errors:
                from kcoord.server.dispatch import CloseConnection  # dispatch imports the handlers

                raise CloseConnection(f"error during produce request with acks=0: {', '.join(sorted(set(errors)))}")
            for rs in results:
                for r in rs:
                    if r.flush:
                        group_commit(r.plog).when_durable(r.last_offset, _flush_failed)
            return NO_RESPONSE
        if acks == -1:
            waiting = [Waiting(r, r.plog.replica, r.last_offset + 1, r.min_isr) for rs in results for r in rs
                       if r.error == ErrorCode.NONE and r.plog is not None and r.plog.replica is not None]
            if waiting:
                return of_coroutine(self._await_replicas(version, req, results, waiting), "Produce")
        if not any(r.flush for rs in results for r in rs):
            return _response(version, req, results)
        return of_coroutine(_await_durable(version, req, results, req.timeout_ms), "Produce")

    def _append_partition(self, topic_name: str, index: int, records: Any, version: int,
                          transactional_id: str | None, added: dict[tuple[str, int], ErrorCode] | None = None,
                          acks: int = 1) -> _Result:
        cluster = self.cluster()
        if cluster is not None and not_leader(cluster, topic_name, index):
            return _Result(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                           f"This server is not the leader for that topic-partition: {topic_name}-{index}")
        topic = self.topics.get(topic_name)
        plog = self.logs.get(topic_name, index) if topic is not None and 0 <= index < topic.partitions else None
        if plog is None:
            return _Result(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                           f"This server does not host this topic-partition: {topic_name}-{index}")
        replica = plog.replica
        epoch = LEADER_EPOCH
        if replica is not None:
            if not replica.is_leader or replica.stopped:
                return _Result(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                               f"This server is not the leader for topic-partition {topic_name}-{index}")
            epoch = replica.leader_epoch
        problem = _records_problem(records, version)
        if problem is not None:
            return _Result(problem.code, problem.message)
        try:
            headers = split_batches(records)
        except CorruptBatchError as e:
            return _Result(ErrorCode.CORRUPT_MESSAGE, f"Record is corrupt in {topic_name}-{index}: {e}")
        if len(headers) != 1:
            return _Result(ErrorCode.INVALID_RECORD,
                           f"Produce requests with version {version} are only allowed to contain exactly one record "
                           "batch per partition")
        h = headers[0]
        if h.compression > _MAX_COMPRESSION:
            return _Result(ErrorCode.CORRUPT_MESSAGE, f"Unknown compression type id {h.compression}")
        if h.compression == _ZSTD and version < 7:
            return _Result(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                           f"Produce requests with version {version} are not allowed to use ZStandard compression")
        values = self.configs.topic_values(topic)  # the topic's effective configs, looked up once
        if replica is not None and acks == -1:
            min_isr = values["min.insync.replicas"]
            if len(replica.isr) < min_isr:
                return _Result(ErrorCode.NOT_ENOUGH_REPLICAS,
                               f"The size of the current ISR {replica.isr} is insufficient to satisfy the min.isr "
                               f"requirement of {min_isr} for partition {topic_name}-{index}")
        if topic.internal:
            return _Result(ErrorCode.INVALID_TOPIC_EXCEPTION, f"Cannot append to internal topic {topic_name}")
        if h.base_offset != 0:
            return _Result(ErrorCode.INVALID_RECORD,
                           f"The baseOffset of the record batch in the append to {topic_name}-{index} should be 0, "
                           f"but it is {h.base_offset}")
        limit = values["max.message.bytes"]
        if h.size > limit:
            return _Result(ErrorCode.MESSAGE_TOO_LARGE,
                           f"The record batch size in the append to {topic_name}-{index} is {h.size} bytes which "
                           f"exceeds the maximum configured value of {limit}.")
        if not crc_ok(records, h):
            return _Result(ErrorCode.CORRUPT_MESSAGE, f"Record is corrupt (stored crc = {h.crc}) in topic partition "
                                                      f"{topic_name}-{index}.")
        why = client_batch_problem(h)
        if why is not None:
            return _Result(ErrorCode.INVALID_RECORD, f"{why} in topic partition {topic_name}-{index}")
        seg_limit = values["segment.bytes"]
        if h.size > seg_limit:
            return _Result(ErrorCode.RECORD_LIST_TOO_LARGE,
                           f"Message batch size is {h.size} bytes in append to partition {topic_name}-{index}, which "
                           f"exceeds the maximum configured segment size of {seg_limit}.")
        append_time = values["message.timestamp.type"] == "LogAppendTime"
        before_max_ms, after_max_ms = timestamp_bounds_of(values)
        now = self.clock.now_ms()
        try:
            bad = validate_records(
                records, f"{topic_name}-{index}", compacted=_compacted(values),
                create_time=not append_time,
                before_max_ms=before_max_ms, after_max_ms=after_max_ms, now=now)
            if bad is not None:
                res = _Result(bad.code, bad.message)
                res.record_errors = bad.errors
                return res
        except UnsupportedCodecError as e:
            # This install lacks the codec (aiokafka needs cramjam for lz4/snappy/zstd): the batch is
            # stored as it came, only the record-level checks above are skipped.
            log.warning("Cannot check records of %s-%d: %s", topic_name, index, e)
        except Exception as e:  # noqa: BLE001 - records that do not decompress or decode
            return _Result(ErrorCode.CORRUPT_MESSAGE, f"Record is corrupt in {topic_name}-{index}: {e!r}")

        dp = self.data_plane
        state = None
        res = _Result()
        if h.producer_id >= 0:
            bad = self.txns.check_batch(transactional_id, version, topic_name, index, plog, h, added)
            if bad is not None:
                res = _Result(*bad)
                res.log_start_offset = plog.log_start_offset
                return res
            state = dp.producers.get(topic_name, index, plog, now)
            try:
                dup = state.check(h)
            except KafkaError as e:
                if e.code == ErrorCode.INVALID_PRODUCER_EPOCH:
                    log.info("%s", e.message)
                res = _Result(e.code, e.message)
                res.log_start_offset = plog.log_start_offset
                return res
            if dup is not None:
                res.base_offset, res.last_offset = dup.first_offset, dup.last_offset
                res.log_append_time = dup.timestamp if append_time else -1
                res.log_start_offset = plog.log_start_offset
                res.plog = plog
                res.flush = plog.durable_offset <= dup.last_offset and needs_flush(values, plog)
                return res
        active = plog.active
        try:
            base, last, lat = plog.append_batches(records, now if append_time else None, epoch, checked=headers)
        except CorruptBatchError as e:
            return _Result(ErrorCode.CORRUPT_MESSAGE, str(e))
        except OSError as e:  # the log directory is offline (logged once by the failure channel)
            return _Result(ErrorCode.KAFKA_STORAGE_ERROR, str(e))
        if state is not None:
            state.update(h, base)
            self.txns.appended(topic_name, index, plog, h, base)
        res.base_offset, res.last_offset, res.log_append_time = base, last, lat
        res.log_start_offset = plog.log_start_offset
        res.plog = plog
        res.flush = needs_flush(values, plog)
        if plog.active is not active and not res.flush:
            flush_rolled(plog)
        if replica is not None:
            res.min_isr = values["min.insync.replicas"]
            self.replicas().leader_appended(replica, base)
        dp.appended(topic_name, index)
        return res

    async def _await_replicas(self, version: int, req: Any, results: list[list[_Result]],
                              waiting: list[Waiting]) -> Any:
        """acks=all on replicated partitions: every ISR member has the records, then the flush
        the topic asks for (if any)."""
        await wait(watch(self.replicas().produce_purgatory, req.timeout_ms, waiting))
        if not any(r.flush and r.error == ErrorCode.NONE for rs in results for r in rs):
            return _response(version, req, results)
        return await _await_durable(version, req, results, req.timeout_ms)



def _flush_failed(exc: BaseException | None) -> None:
    if exc is not None and not isinstance(exc, OSError):  # an OSError was logged by the failure channel
        log.error("flush after an acks=0 produce failed: %r", exc)


def _close_or(acks: int, ctx: RequestContext, response: Any, code: ErrorCode) -> Any:
    if acks == 0:
        from kcoord.server.dispatch import CloseConnection

        raise CloseConnection(f"error during produce request with acks=0: {code.name}")
    return response
