"""Storage I/O failures, as Kafka handles them: the log directory goes offline, nothing that is
not known durable is acknowledged, the error is logged once with the directory's path, and
with no log directory left the server halts with exit code 1. Once the fault is repaired, a
restart recovers every acknowledged record and commit.

Real faults, made by the test (it runs as root, as CI does):

- a failed fdatasync: the log directory is an ext4 filesystem on a loop device whose backing
  file lives on a small tmpfs. Filling that tmpfs leaves ext4 believing it has room, so
  write(2) succeeds into the page cache, and the writeback that fdatasync starts fails in the
  block layer: fdatasync returns EIO or ENOSPC (and, the trap Kafka's policy avoids, a second
  fdatasync then returns success although the pages were dropped). Repair: free the backing
  store, e2fsck, mount again. The loop device is limited to requests of one 4 KiB page (ext4
  with 4 KiB blocks on 4 KiB sectors): the loop driver completes a write request that the
  backing file took only part of (its first pages fit, the next needed a new tmpfs page) as a
  success, so with larger requests a successful fdatasync could leave a hole of zeros where
  acknowledged records were (docs/durability.md, "Storage faults"). A one-page request is
  stored whole or fails.
- a failed write: the log directory is a small tmpfs filled up; write(2) returns ENOSPC.
  Repair: delete the filler.

Both faults are driven by real clients: a confluent-kafka producer (acks=all) and a committer
(OffsetCommit on the wire) run until the server stops answering.
"""
from __future__ import annotations

import errno
import mmap
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import KcoordProcess, call
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest

from kcoord.protocol.errors import ErrorCode

pytestmark = pytest.mark.integration

TOPIC, GROUP, PARTITIONS = "durable", "durable-group", 2
T = OffsetCommitRequest.OffsetCommitRequestTopic
P = T.OffsetCommitRequestPartition


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=120)


def _need_root() -> None:
    if os.geteuid() != 0:
        pytest.fail("mounting the faulty filesystems needs root (CI runs as root)")


class LoopDisk:
    """ext4 on a loop device backed by a sparse 64 MiB file on a 24 MiB tmpfs, every I/O request
    one whole 4 KiB page of the backing file (see the module docstring)."""

    PAGE = 4096

    def __init__(self, root: Path) -> None:
        self.back, self.mnt = root / "back", root / "mnt"
        self.image, self.filler = self.back / "disk.img", self.back / "filler"
        self.back.mkdir()
        self.mnt.mkdir()
        self.dev: str | None = None
        self._found_limit = ""

    def mount_backing(self) -> None:
        r = _run("mount", "-t", "tmpfs", "-o", "size=24m,huge=never", "tmpfs", str(self.back))
        assert r.returncode == 0, r.stderr

    def create(self) -> LoopDisk:
        self.mount_backing()
        with open(self.image, "wb") as f:
            f.truncate(64 << 20)
        r = _run("mkfs.ext4", "-q", "-F", "-b", str(self.PAGE), str(self.image))
        assert r.returncode == 0, r.stderr
        # The filler exists from the start, holding a reserve: on a busy run the server's own
        # writes can use up the backing store first, and then the filler could not be created
        # (ENOSPC at open) nor repair() free anything.
        with open(self.filler, "wb") as f:
            f.write(b"\0" * (2 << 20))
        self.mount()
        return self

    def mount(self) -> None:
        r = _run("mount", self.attach(), str(self.mnt))
        assert r.returncode == 0, r.stderr

    def attach(self) -> str:
        """The image as a loop device whose every request is one page of the backing file."""
        r = _run("losetup", "--show", "-f", "--sector-size", str(self.PAGE), str(self.image))
        if r.returncode != 0:
            _run("umount", str(self.back))
            pytest.skip(f"no loop device in this sandbox (losetup: {r.stderr.strip()})")
        self.dev = r.stdout.strip()
        # Before anything is mounted on it: no request may span two pages of the backing file,
        # or a write the tmpfs takes only part of is reported as a success (module docstring).
        # The limit outlives the device's detach, so detach() puts the one found back.
        limit = self._queue() / "max_sectors_kb"
        self._found_limit = limit.read_text().strip()
        limit.write_text(str(self.PAGE // 1024))
        assert limit.read_text().strip() == str(self.PAGE // 1024)
        assert (self._queue() / "logical_block_size").read_text().strip() == str(self.PAGE)
        return self.dev

    def _queue(self) -> Path:
        assert self.dev is not None
        return Path("/sys/block") / Path(self.dev).name / "queue"

    def detach(self) -> None:
        if self.dev is not None:
            if self._found_limit:
                (self._queue() / "max_sectors_kb").write_text(self._found_limit)
            _run("losetup", "-d", self.dev)
            self.dev = None

    def break_it(self) -> None:
        """Use up the backing store: ext4's next writeback of a new block fails."""
        fill(self.filler)

    def repair(self) -> str:
        """Free the backing store and check the filesystem, as an operator would."""
        assert _run("umount", str(self.mnt)).returncode == 0
        self.detach()
        self.filler.unlink()
        r = _run("e2fsck", "-fy", str(self.image))
        assert r.returncode in (0, 1, 2), r.stdout + r.stderr  # 1, 2: errors corrected
        self.mount()
        return r.stdout

    def remove(self) -> None:
        _run("umount", "-l", str(self.mnt))
        self.detach()
        _run("umount", "-l", str(self.back))


def fill(path: Path) -> None:
    # unbuffered: a buffered file kept what its failed flush could not write, and closing it
    # raised ENOSPC again out of the `with` (the fixture's own fault, not the server's)
    with open(path, "ab", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError:
            pass


@pytest.fixture
def loop_disk(tmp_path) -> Iterator[LoopDisk]:
    _need_root()
    if shutil.which("mkfs.ext4") is None:
        pytest.fail("mkfs.ext4 missing (Debian package e2fsprogs)")
    disk = LoopDisk(tmp_path)
    try:
        disk.create()
        yield disk
    finally:
        disk.remove()


@pytest.fixture
def small_tmpfs(tmp_path) -> Iterator[Path]:
    _need_root()
    mnt = tmp_path / "disk"
    mnt.mkdir()
    assert _run("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)).returncode == 0
    yield mnt
    _run("umount", "-l", str(mnt))


# ---- the load: real clients writing until the server stops answering ----


class Writers:
    """A confluent-kafka producer (acks=all) and an OffsetCommit loop, recording what was
    acknowledged and what was only attempted."""

    def __init__(self, srv: KcoordProcess) -> None:
        self.srv = srv
        self.acked: dict[tuple[int, int], bytes] = {}  # (partition, offset) -> value
        self.produce_errors: list[str] = []
        self.commit_acked = 0  # the highest offset whose commit was acknowledged
        self.commit_tried = 0
        self.commit_errors: set[int] = set()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._produce, daemon=True),
                         threading.Thread(target=self._commit, daemon=True)]

    def start(self) -> Writers:
        for t in self._threads:
            t.start()
        return self

    def _produce(self) -> None:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": self.srv.bootstrap, "acks": "all", "linger.ms": 5,
                      "message.timeout.ms": 20000, "retries": 0, "enable.idempotence": False,
                      "reconnect.backoff.max.ms": 200, "log_level": 1})

        def done(err, msg) -> None:
            if err is None:
                self.acked[(msg.partition(), msg.offset())] = msg.value()
            else:
                self.produce_errors.append(str(err))

        i = 0
        while not self._stop.is_set():
            try:
                p.produce(TOPIC, key=b"k%d" % i, value=b"v%06d-" % i + b"x" * 1500, partition=i % PARTITIONS,
                          on_delivery=done)
            except BufferError:
                pass
            i += 1
            p.poll(0.005)
        p.flush(2)  # what the server acknowledged has been reported by now; the rest never will be

    def _commit(self) -> None:
        n = 0
        while not self._stop.is_set():
            n += 1
            self.commit_tried = n
            try:
                code = commit(self.srv.bootstrap, n)
            except (OSError, AssertionError):  # the server went away
                time.sleep(0.05)
                continue
            if code == ErrorCode.NONE:
                self.commit_acked = n
            else:
                self.commit_errors.add(code)

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(60)


def commit(bootstrap: str, offset: int) -> int:
    r = call(bootstrap, OffsetCommitRequest(
        group_id=GROUP, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
        topics=[T(name=TOPIC, partitions=[P(partition_index=p, committed_offset=offset, committed_metadata="")
                                          for p in range(PARTITIONS)])]), 8)
    return max(p.error_code for p in r.topics[0].partitions)


def committed(bootstrap: str) -> dict[int, int]:
    deadline = time.monotonic() + 60
    while True:
        r = call(bootstrap, OffsetFetchRequest(group_id=GROUP, topics=None, require_stable=True), 7)
        if r.error_code == 0:
            return {p.partition_index: p.committed_offset for t in r.topics if t.name == TOPIC for p in t.partitions}
        assert time.monotonic() < deadline, r
        time.sleep(0.2)


def read_all(bootstrap: str, ends: dict[int, int]) -> dict[tuple[int, int], bytes]:
    """Every record of TOPIC (confluent-kafka), up to `ends`."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False})
    got: dict[tuple[int, int], bytes] = {}
    try:
        c.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 120
        while any(sum(1 for (q, _o) in got if q == p) < ends[p] for p in range(PARTITIONS)):
            assert time.monotonic() < deadline, f"read {len(got)} records of {sum(ends.values())}"
            for m in c.consume(500, 0.5):
                if m.error() is None:
                    got[(m.partition(), m.offset())] = m.value()
    finally:
        c.close()
    return got


def end_offsets(bootstrap: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "ends"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1] for p in range(PARTITIONS)}
    finally:
        c.close()


def start_server(log_dir: Path, output: Path, port: int | None = None, flush_every_message: bool = False) -> KcoordProcess:
    """flush_every_message: log.flush.interval.messages=1, so every acknowledged record was
    fsynced first (Kafka's default leaves data records to the page cache, which a failed
    writeback may drop: only flush.messages=1 promises they survive it)."""
    overrides = {"offsets.topic.num.partitions": "3"}
    if flush_every_message:
        overrides["log.flush.interval.messages"] = "1"
    srv = KcoordProcess(log_dir, port=port, overrides=overrides)
    srv.output = output  # not on the disk that is about to fail
    return srv.start()


def create_topic(srv: KcoordProcess) -> None:
    CT = CreateTopicsRequest.CreatableTopic
    r = call(srv.bootstrap, CreateTopicsRequest(
        topics=[CT(name=TOPIC, num_partitions=PARTITIONS, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=15000, validate_only=False), 5)
    assert r.topics[0].error_code == 0, r


def run_until_the_server_halts(srv: KcoordProcess, writers: Writers, break_it) -> int:
    """Let the writers get acknowledgements, break the disk, and wait for the halt."""
    deadline = time.monotonic() + 90
    while len(writers.acked) < 200 or writers.commit_acked < 20:
        assert time.monotonic() < deadline, "no acknowledged writes before the fault"
        assert srv.alive(), srv.log_text()[-3000:]
        time.sleep(0.1)
    break_it()
    assert srv.proc is not None
    try:
        return srv.proc.wait(180)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the server kept running on a broken disk\n{srv.log_text()[-4000:]}") from None
    finally:
        writers.stop()


def check_the_failure_log(srv: KcoordProcess, log_dir: Path) -> str:
    log = srv.log_text()
    offline = [ln for ln in log.splitlines() if "is now offline" in ln]
    assert len(offline) == 1, offline  # logged once, whatever else failed after it
    assert str(log_dir) in offline[0], offline[0]
    assert f"Shutdown broker because all log dirs in {log_dir} have failed" in log
    return offline[0]


class LostAcknowledged(AssertionError):
    """Acknowledged records missing after recovery."""


def check_recovered(srv: KcoordProcess, writers: Writers) -> None:
    """Every acknowledged record and commit is back; nothing unacknowledged is half there."""
    ends = end_offsets(srv.bootstrap)
    records = read_all(srv.bootstrap, ends)
    lost = {k for k in writers.acked if records.get(k) != writers.acked[k]}
    if lost:
        raise LostAcknowledged(f"{len(lost)} of {len(writers.acked)} acknowledged records lost, e.g. "
                               f"{sorted(lost)[:5]}; recovered ends {ends}")
    got = committed(srv.bootstrap)
    assert set(got) == set(range(PARTITIONS)), got
    for p, off in got.items():
        # the last acknowledged commit, or a later one whose answer never came back
        if off < writers.commit_acked:
            raise LostAcknowledged(f"partition {p}: committed offset {off} recovered, {writers.commit_acked} acknowledged")
        assert off <= writers.commit_tried, (p, off, writers.commit_tried)


def test_a_failed_fdatasync_takes_the_log_dir_offline_and_halts(loop_disk, tmp_path):
    log_dir = loop_disk.mnt / "data"
    srv = start_server(log_dir, tmp_path / "kcoord.log", flush_every_message=True)
    try:
        create_topic(srv)
        writers = Writers(srv).start()
        code = run_until_the_server_halts(srv, writers, loop_disk.break_it)
    finally:
        if srv.alive():
            srv.kill()
    assert code == 1, srv.log_text()[-3000:]
    line = check_the_failure_log(srv, log_dir)
    assert "syncing" in line or "appending" in line, line
    # The fault shows as the server's own write or fdatasync failing (EIO, ENOSPC) or, when
    # ext4's journal met the failed writeback first and aborted (the filesystem turns
    # read-only), as EROFS on the server's next write: the same fault, seen a step later.
    errors = ("Input/output error", "No space left", "Read-only file system")
    assert any(e in srv.log_text() for e in errors), srv.log_text()[-3000:]
    assert writers.acked and writers.commit_acked >= 20

    fsck = loop_disk.repair()
    again = start_server(log_dir, tmp_path / "kcoord-again.log", port=srv.port, flush_every_message=True)
    try:
        check_recovered(again, writers)
    finally:
        again.stop()
    print(f"\nfdatasync failure: {len(writers.acked)} records and {writers.commit_acked} commits acknowledged, "
          f"all recovered; produce errors after the fault: {len(writers.produce_errors)}; "
          f"commit errors: {sorted(writers.commit_errors)}; e2fsck: {fsck.strip().splitlines()[-1:]}")


def test_the_loop_disk_fails_a_write_its_full_backing_store_takes_only_part_of(tmp_path):
    """The premise of the fdatasync test: the loop device reports every write the backing store
    could not take whole as failed. Linux's loop driver completes a request that the backing
    file took only its first pages of as a success (the rest left a hole of zeros); LoopDisk
    limits requests to one page, so such a write fails instead."""
    _need_root()
    page = LoopDisk.PAGE
    disk = LoopDisk(tmp_path)
    try:
        disk.mount_backing()
        with open(disk.image, "wb") as f:
            f.truncate(1 << 20)
            f.write(b"\1" * page)  # the backing file's first page exists, its second is a hole
        dev = disk.attach()
        fill(disk.filler)  # and the second can no longer be created
        buf = mmap.mmap(-1, 2 * page)  # page-aligned, for O_DIRECT
        buf.write(b"\xab" * 2 * page)
        fd = os.open(dev, os.O_RDWR | os.O_DIRECT)
        try:
            with pytest.raises(OSError) as failed:
                written = os.pwritev(fd, [buf], 0)
                os.fdatasync(fd)
                stored = mmap.mmap(-1, 2 * page)
                os.preadv(fd, [stored], 0)
                print(f"write of {2 * page} bytes returned {written}, fdatasync 0; second page stored: "
                      f"{stored[page:] == buf[page:]}")
        finally:
            os.close(fd)
        assert failed.value.errno in (errno.EIO, errno.ENOSPC), failed.value
    finally:
        disk.remove()


def test_a_failed_write_on_a_full_disk_takes_the_log_dir_offline_and_halts(small_tmpfs, tmp_path):
    log_dir = small_tmpfs / "data"
    srv = start_server(log_dir, tmp_path / "kcoord.log")
    try:
        create_topic(srv)
        writers = Writers(srv).start()
        code = run_until_the_server_halts(srv, writers, lambda: fill(small_tmpfs / "filler"))
    finally:
        if srv.alive():
            srv.kill()
    assert code == 1, srv.log_text()[-3000:]
    line = check_the_failure_log(srv, log_dir)
    assert "No space left on device" in srv.log_text(), line

    (small_tmpfs / "filler").unlink()  # the repair: space again
    again = start_server(log_dir, tmp_path / "kcoord-again.log", port=srv.port)
    try:
        check_recovered(again, writers)
        # and it serves writes again
        assert commit(again.bootstrap, writers.commit_tried + 1) == ErrorCode.NONE
    finally:
        again.stop()
