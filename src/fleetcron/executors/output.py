"""Bounded capture of a command's output: the first and last N bytes, whatever is written.

Memory stays under ``2 * limit`` bytes no matter how much the command prints, so a job
that writes gigabytes costs a counter, not RAM.
"""

from __future__ import annotations

from fleetcron.executors.base import OutputExcerpt


class BoundedOutput:
    """Keeps the head and tail of a byte stream, each up to ``limit`` bytes."""

    __slots__ = ("_head", "_limit", "_tail", "_total")

    def __init__(self, limit: int) -> None:
        if limit < 0:
            raise ValueError(f"limit must be >= 0, got {limit}")
        self._limit = limit
        self._head = bytearray()
        self._tail = bytearray()
        self._total = 0

    @property
    def total_bytes(self) -> int:
        return self._total

    def feed(self, data: bytes) -> None:
        """Account for ``data``, keeping only what the head and tail still need."""
        self._total += len(data)
        room = self._limit - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if not data or self._limit == 0:
            return
        if len(data) >= self._limit:
            self._tail[:] = data[-self._limit :]
        else:
            self._tail += data
            excess = len(self._tail) - self._limit
            if excess > 0:
                del self._tail[:excess]

    def excerpt(self) -> OutputExcerpt:
        """The head and tail so far, decoded as UTF-8 (invalid bytes replaced)."""
        kept = len(self._head) + len(self._tail)
        return OutputExcerpt(
            head=self._head.decode("utf-8", errors="replace"),
            tail=self._tail.decode("utf-8", errors="replace"),
            total_bytes=self._total,
            truncated=kept < self._total,
        )


class MarkerLineSplitter:
    """Pulls one marker line out of the start of a stream and passes the rest on.

    The SSH executor's wrapper prints ``<marker><value>\\n`` on stderr before the user's
    command starts; a login shell may print something earlier (a noisy ``.bashrc``).
    Bytes before the marker are forwarded unchanged. If the marker has not shown up
    within ``max_scan`` bytes, scanning stops and everything is forwarded.
    """

    __slots__ = ("_buffer", "_done", "_marker", "_max_scan", "_sink", "value")

    def __init__(self, marker: bytes, sink: BoundedOutput, max_scan: int = 65536) -> None:
        self._marker = marker
        self._sink = sink
        self._max_scan = max_scan
        self._buffer = bytearray()
        self._done = False
        self.value: bytes | None = None

    def feed(self, data: bytes) -> None:
        if self._done:
            self._sink.feed(data)
            return
        self._buffer += data
        start = self._buffer.find(self._marker)
        if start >= 0:
            end = self._buffer.find(b"\n", start)
            if end < 0:
                return
            self.value = bytes(self._buffer[start + len(self._marker) : end])
            self._finish(bytes(self._buffer[:start] + self._buffer[end + 1 :]))
        elif len(self._buffer) > self._max_scan:
            self._finish(bytes(self._buffer))

    def flush(self) -> None:
        """Forward whatever is still held back (the stream ended)."""
        if not self._done:
            self._finish(bytes(self._buffer))

    def _finish(self, rest: bytes) -> None:
        self._done = True
        self._buffer = bytearray()
        if rest:
            self._sink.feed(rest)
