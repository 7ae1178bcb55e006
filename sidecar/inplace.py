"""--in-place: make sure no server uses the log directory, and swap compacted partitions in.

Refusing to run against a live server (all checks must pass, before compaction and again
right before the swap):

1. Kafka's log-directory lock: `<log.dirs>/.lock`, locked exclusively and non-blocking with
   both POSIX (fcntl, what Java's FileChannel.tryLock takes, i.e. a Kafka broker) and BSD
   (flock) locks, and held for the whole run, so two compactors never overlap either.
2. Open files: kcoord keeps a file descriptor open on every segment of every partition for
   as long as it runs (storage.segment.LogSegment), so any process with an fd under one of
   the partition directories (found through /proc/<pid>/fd) means a live server (or dump
   tool): refuse. A process whose fds cannot be read (another user, no root) is refused too
   if its command line mentions kcoord / kafka / the log directory.
3. Optional `--server-address host:port` (repeatable): refuse if something accepts a TCP
   connection there. This is the check that works across PID namespaces (containers: the
   compose `compactor` service passes `kcoord:9092`).

What this cannot see: a server in another PID namespace not named with --server-address,
or one starting between the final check and the swap. kcoord does not (yet) take Kafka's
`.lock` itself; once it does, check 1 alone is sound everywhere.

The swap, per partition, with the compacted copy built beside the original as
`__consumer_offsets-N.<hex>-delete` (a name Kafka deletes and kcoord ignores, so a crash
while building leaves only garbage that is cleaned up):
- preferred: renameat2(RENAME_EXCHANGE) swaps the two directories atomically; the
  `-delete` name then holds the original, which is removed after fsyncing the parent.
- fallback (filesystem without RENAME_EXCHANGE): rename the original to
  `__consumer_offsets-N.<hex>-delete`, the new one into place, fsync the parent, remove the
  old. A journal file (`.kcoord-compact-swap`) written first lets the next run roll a swap
  interrupted between the two renames forward.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import fcntl
import json
import os
import shutil
import socket
import uuid

from sidecar.partition_io import fsync_dir

__all__ = ["DirectoryInUseError", "LogDirLock", "check_not_in_use", "recover_interrupted_swaps",
           "staging_name", "swap_in"]

LOCK_FILE = ".lock"
JOURNAL = ".kcoord-compact-swap"
RENAME_EXCHANGE = 2
AT_FDCWD = -100


class DirectoryInUseError(RuntimeError):
    """A server (or another compactor) is using the log directory."""


class LogDirLock:
    """Exclusive POSIX + BSD lock on <log_dir>/.lock for the compactor's whole run."""

    def __init__(self, log_dir: str) -> None:
        self.path = os.path.join(log_dir, LOCK_FILE)
        self.fd = -1

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise DirectoryInUseError(
                    f"{self.path} is locked: a Kafka broker, a kcoord server or another compactor "
                    "holds the log directory") from None
            raise
        self.fd = fd

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing drops both locks
            self.fd = -1

    def __enter__(self) -> LogDirLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _processes_using(dirs: list[str], log_dir: str) -> list[str]:
    """Descriptions of other processes with files open under `dirs` (Linux /proc)."""
    if not os.path.isdir("/proc"):
        return []
    prefixes = tuple(os.path.realpath(d) + os.sep for d in dirs)
    me = os.getpid()
    found = []
    real_log_dir = os.path.realpath(log_dir)
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == me:
            continue
        fd_dir = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except PermissionError:
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if "kcoord" in cmd or "kafka" in cmd.lower() or real_log_dir in cmd:
                found.append(f"pid {pid} ({cmd.strip()[:80]}; its open files are not readable)")
            continue
        except OSError:
            continue  # exited meanwhile
        for fd in fds:
            try:
                target = os.readlink(f"{fd_dir}/{fd}")
            except OSError:
                continue
            if target.startswith(prefixes):
                found.append(f"pid {pid} has {target} open")
                break
    return found


def _listening(address: str, timeout: float = 1.0) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=timeout):
            return True
    except OSError:
        return False


def check_not_in_use(log_dir: str, partition_dirs: list[str], server_addresses: list[str]) -> None:
    users = _processes_using(partition_dirs, log_dir)
    if users:
        raise DirectoryInUseError("refusing --in-place: " + "; ".join(users[:5]))
    for addr in server_addresses:
        if _listening(addr):
            raise DirectoryInUseError(f"refusing --in-place: a server is listening on {addr}")


def staging_name(partition_dir: str) -> str:
    """`<dir>.<32 hex>-delete`: Kafka's name for a directory to delete (kcoord ignores it)."""
    return f"{partition_dir}.{uuid.uuid4().hex}-delete"


_renameat2 = None


def _exchange(a: str, b: str) -> bool:
    """Atomically swap two paths with renameat2(RENAME_EXCHANGE); False if unsupported."""
    global _renameat2
    if _renameat2 is None:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        _renameat2 = getattr(libc, "renameat2", False)
        if _renameat2:
            _renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if not _renameat2:
        return False
    rc = _renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), a)


def _write_journal(log_dir: str, entry: dict) -> None:
    path = os.path.join(log_dir, JOURNAL)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(entry, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(log_dir)


def _clear_journal(log_dir: str) -> None:
    try:
        os.unlink(os.path.join(log_dir, JOURNAL))
    except FileNotFoundError:
        return
    fsync_dir(log_dir)


def recover_interrupted_swaps(log_dir: str) -> str | None:
    """Roll forward a fallback swap interrupted between its two renames. Returns what it did."""
    path = os.path.join(log_dir, JOURNAL)
    try:
        with open(path) as f:
            entry = json.load(f)
    except FileNotFoundError:
        return None
    live, new, old = entry["live"], entry["new"], entry["old"]
    done = []
    if not os.path.exists(live) and os.path.isdir(new):
        os.rename(new, live)
        done.append(f"moved {new} into place")
    elif not os.path.exists(live) and os.path.isdir(old):
        os.rename(old, live)
        done.append(f"restored {old}")
    fsync_dir(log_dir)
    if os.path.isdir(old) and os.path.exists(live):
        shutil.rmtree(old, ignore_errors=True)
    _clear_journal(log_dir)
    return "; ".join(done) or "nothing to roll forward"


def swap_in(live: str, staged: str, *, allow_exchange: bool = True) -> str:
    """Replace directory `live` by `staged` (same parent). Returns "exchange" or "rename"."""
    parent = os.path.dirname(os.path.abspath(live))
    if allow_exchange and _exchange(staged, live):
        method = "exchange"  # `staged` now names the original
        fsync_dir(parent)
        shutil.rmtree(staged)
        fsync_dir(parent)
        return method
    old = staging_name(live)
    _write_journal(parent, {"live": live, "new": staged, "old": old})
    os.rename(live, old)
    os.rename(staged, live)
    fsync_dir(parent)
    shutil.rmtree(old)
    _clear_journal(parent)
    return "rename"
