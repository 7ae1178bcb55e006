"""Kafka framing: every request is a big-endian int32 size followed by that many bytes."""
from __future__ import annotations

DEFAULT_MAX_REQUEST_BYTES = 100 * 1024 * 1024  # socket.request.max.bytes


class FrameTooLarge(Exception):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"frame of {size} bytes exceeds socket.request.max.bytes={limit}")
        self.size = size
        self.limit = limit


class FrameDecoder:
    """Accumulates bytes from a socket and yields whole frames (without their size prefix).

    A negative or oversized size raises FrameTooLarge before any of the body is buffered, so a
    hostile peer cannot make us allocate its claimed size.
    """

    __slots__ = ("_buf", "_max")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> None:
        self._buf = bytearray()
        self._max = max_frame_bytes

    @property
    def limit(self) -> int:
        return self._max

    @limit.setter
    def limit(self, max_frame_bytes: int) -> None:
        """A connection that is still authenticating accepts only small frames."""
        self._max = max_frame_bytes

    def feed(self, data: bytes) -> list[bytes]:
        buf = self._buf
        if not buf and len(data) >= 4:
            # Common case: the chunk is exactly one whole request; no copy into the buffer.
            size = int.from_bytes(data[:4], "big", signed=True)
            if size + 4 == len(data) and 0 <= size <= self._max:
                return [data[4:]]
        buf += data
        frames: list[bytes] = []
        pos = 0
        n = len(buf)
        while n - pos >= 4:
            size = int.from_bytes(buf[pos : pos + 4], "big", signed=True)
            if size < 0 or size > self._max:
                raise FrameTooLarge(size, self._max)
            end = pos + 4 + size
            if end > n:
                break
            with memoryview(buf) as view:  # one copy, not two
                frames.append(bytes(view[pos + 4 : end]))
            pos = end
        if pos:
            del buf[:pos]
        return frames

    @property
    def buffered(self) -> int:
        return len(self._buf)


def frame(payload: bytes | bytearray) -> bytes:
    return len(payload).to_bytes(4, "big") + payload
