"""Bounded capture of a command's output: the first and last N bytes, whatever is written.

Memory stays under ``2 * limit`` bytes no matter how much the command prints, so a job
that writes gigabytes costs a counter, not RAM.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, Protocol, TypeVar

LIVE_HEAD_BYTES: Final = 4096
"""Bytes a live buffer keeps from the start of a run's output."""
LIVE_TAIL_BYTES: Final = 65536
"""Bytes a live buffer keeps from the end of a run's output (what a follower can catch up on)."""
STOPPED: Final = "stopped on request; process group killed"
"""``ExecResult.error`` of a run its executor killed because a stop was requested."""
MARKER_WAIT_S: Final = 5.0
"""On a stop, how long to wait for the wrapper to report the command's process group."""

_T = TypeVar("_T")


@dataclass(frozen=True)
class OutputExcerpt:
    """A bounded view of one output stream.

    ``head`` is the first bytes written and ``tail`` the last ones, each at most the
    request's ``output_limit`` bytes, decoded as UTF-8 with replacement characters.
    When the whole stream fits, ``head`` holds all of it and ``tail`` is empty.
    """

    head: str
    tail: str
    total_bytes: int
    truncated: bool

    @property
    def text(self) -> str:
        """Head and tail joined, with a marker where bytes were left out."""
        if not self.truncated:
            return self.head + self.tail
        skipped = self.total_bytes - len(self.head.encode()) - len(self.tail.encode())
        return f"{self.head}\n[... {max(skipped, 0)} bytes omitted ...]\n{self.tail}"


EMPTY_OUTPUT: Final = OutputExcerpt(head="", tail="", total_bytes=0, truncated=False)


class Sink(Protocol):
    """Where an executor's reader puts the bytes it reads."""

    def feed(self, data: bytes) -> None: ...


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

    def __init__(self, marker: bytes, sink: Sink, max_scan: int = 65536) -> None:
        self._marker = marker
        self._sink = sink
        self._max_scan = max_scan
        self._buffer = bytearray()
        self._done = False
        self.value: bytes | None = None

    @classmethod
    def passthrough(cls, sink: Sink) -> MarkerLineSplitter:
        """A splitter that looks for no marker (the process group is known without it):
        what the command writes is never taken for one."""
        splitter = cls(b"", sink)
        splitter._done = True
        return splitter

    @property
    def waiting(self) -> bool:
        """Whether the marker may still come (it has not, and the scan has not stopped)."""
        return not self._done

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


class Tee:
    """Feeds what it reads to a recorded stream and, when a run is followed, to its live
    buffer."""

    __slots__ = ("_first", "_second")

    def __init__(self, first: Sink, second: Sink | None) -> None:
        self._first = first
        self._second = second

    def feed(self, data: bytes) -> None:
        self._first.feed(data)
        if self._second is not None:
            self._second.feed(data)


def tee(sink: BoundedOutput, live: LiveOutput | None) -> Sink:
    """``sink`` alone when nobody follows the run, else both."""
    return sink if live is None else Tee(sink, live)


@dataclass(frozen=True)
class LiveChunk:
    """What a follower gets from :meth:`LiveOutput.read`.

    ``text`` is the output read (decoded as UTF-8, invalid bytes replaced); ``offset`` is
    where the next read starts (``since`` for the next call); ``gap`` is how many bytes in
    the middle are no longer kept (they fell out of the buffer), and ``gap_at`` where in
    ``text`` (in characters) they were; ``total`` is every byte written so far.
    """

    text: str
    offset: int
    gap: int
    total: int
    gap_at: int = 0

    @property
    def marked(self) -> str:
        """``text`` with a visible marker where bytes were left out."""
        if not self.gap:
            return self.text
        cut = self.gap_at
        return f"{self.text[:cut]}\n[... {self.gap} bytes not kept ...]\n{self.text[cut:]}"


class LiveOutput:
    """The output of a run while it runs, stdout and stderr interleaved as they arrive, for
    followers (the run page, ``fleetcron runs tail``), and the run's stop request.

    Keeps the first ``head_limit`` and the last ``tail_limit`` bytes, addressed by their
    offset in the whole stream: memory stays under ``head_limit + tail_limit`` bytes
    whatever the command prints. Fed on the event loop; read from any thread (a lock keeps
    the head, the tail and the count consistent).

    :meth:`request_stop` asks the executor running the command to kill its whole process
    group now; the executor then reports the run as it ended and the scheduler records it
    ``cancelled``.
    """

    __slots__ = (
        "_head",
        "_head_limit",
        "_lock",
        "_on_stop",
        "_tail",
        "_tail_limit",
        "_total",
        "stop",
    )

    def __init__(self, head_limit: int = LIVE_HEAD_BYTES, tail_limit: int = LIVE_TAIL_BYTES):
        if head_limit < 0 or tail_limit < 1:
            raise ValueError(f"limits must be >= 0 and >= 1, got {head_limit}, {tail_limit}")
        self._head_limit = head_limit
        self._tail_limit = tail_limit
        self._head = bytearray()
        self._tail = bytearray()
        self._total = 0
        self._lock = threading.Lock()
        self.stop = asyncio.Event()
        self._on_stop: list[Callable[[], object]] = []

    @property
    def total_bytes(self) -> int:
        return self._total

    @property
    def stop_requested(self) -> bool:
        return self.stop.is_set()

    def request_stop(self) -> None:
        """Ask the executor to kill the run (call on the event loop the run is on)."""
        self.stop.set()
        for callback in list(self._on_stop):
            callback()

    def on_stop(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Call ``callback`` (on the event loop) when the stop is requested; returns what
        forgets it."""
        self._on_stop.append(callback)
        return functools.partial(self._forget, callback)

    def _forget(self, callback: Callable[[], object]) -> None:
        with contextlib.suppress(ValueError):
            self._on_stop.remove(callback)

    def feed(self, data: bytes) -> None:
        if not data:
            return
        with self._lock:
            self._total += len(data)
            room = self._head_limit - len(self._head)
            if room > 0:
                self._head += data[:room]
            if len(data) >= self._tail_limit:
                self._tail[:] = data[-self._tail_limit :]
            else:
                self._tail += data
                excess = len(self._tail) - self._tail_limit
                if excess > 0:
                    del self._tail[:excess]

    def read(self, since: int = 0, *, final: bool = False) -> LiveChunk:
        """The output from byte ``since`` on, as far as it is kept.

        Bytes before the kept tail (and after the head) are gone: the chunk starts at the
        tail then, and ``gap`` says how many were skipped. An offset past the end (a
        follower of another buffer) reads from the end. Unless ``final``, an incomplete
        UTF-8 character at the end is held back for the next read.
        """
        with self._lock:
            total = self._total
            head = bytes(self._head)
            tail = bytes(self._tail)
        since = min(max(since, 0), total)
        tail_start = total - len(tail)
        head_end = len(head)
        # What is kept from ``since`` on: bytes before a gap, the gap, bytes after it.
        if since < head_end and tail_start <= head_end:
            before, gap, after = head[since:] + tail[head_end - tail_start :], 0, b""
        elif since < head_end:
            before, gap, after = head[since:], tail_start - head_end, tail
        elif since >= tail_start:
            before, gap, after = tail[since - tail_start :], 0, b""
        else:
            before, gap, after = b"", tail_start - since, tail
        if not final:
            if after:
                after = after[: _complete_utf8(after)]
            else:
                before = before[: _complete_utf8(before)]
        offset = since + len(before) + gap + len(after)
        if gap:
            # Text resuming after a gap may start inside a character: drop the pieces.
            skip = _continuation_prefix(after)
            after, gap = after[skip:], gap + skip
        first = before.decode("utf-8", errors="replace")
        text = first + after.decode("utf-8", errors="replace")
        return LiveChunk(text=text, offset=offset, gap=gap, total=total, gap_at=len(first))


def _complete_utf8(data: bytes) -> int:
    """Length of the longest prefix of ``data`` that does not end inside a character."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte < 0x80:
            return len(data)
        if byte >= 0xC0:  # a lead byte: how long is its character?
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return len(data) if back >= need else len(data) - back
    return len(data)


def _continuation_prefix(data: bytes) -> int:
    """How many UTF-8 continuation bytes (at most 3) ``data`` starts with."""
    count = 0
    while count < min(3, len(data)) and 0x80 <= data[count] < 0xC0:
        count += 1
    return count


class StopRequested(Exception):
    """Raised by :func:`unless_stopped` when the run's stop was requested first."""


async def unless_stopped(awaitable: Awaitable[_T], live: LiveOutput | None) -> _T:
    """Await ``awaitable``; raise :class:`StopRequested` (cancelling it) if the stop of
    ``live`` is requested first. Cancelling the caller cancels both.

    The stop cancels the awaiting task itself (no task or wait per run beside it): the
    cancellation it caused is taken back and raised as :class:`StopRequested`; any other
    (the caller's, a timeout around it) goes on as a cancellation."""
    if live is None:
        return await awaitable
    if live.stop_requested:
        asyncio.ensure_future(awaitable).cancel()
        raise StopRequested
    task = asyncio.current_task()
    assert task is not None
    stopped = False

    def stop() -> None:
        nonlocal stopped
        stopped = True
        task.cancel()

    forget = live.on_stop(stop)
    try:
        return await awaitable
    except asyncio.CancelledError:
        if stopped and task.uncancel() == 0:
            raise StopRequested from None
        raise
    finally:
        forget()
