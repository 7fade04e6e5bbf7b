"""The live buffer of a running run: offsets, the gap when a follower falls behind, whole
characters only, and memory bounded by its limits whatever is fed."""

from __future__ import annotations

import asyncio

import pytest

from fleetcron.executors.output import (
    BoundedOutput,
    LiveOutput,
    StopRequested,
    Tee,
    tee,
    unless_stopped,
)


def test_a_follower_gets_each_byte_once_in_order() -> None:
    live = LiveOutput(head_limit=8, tail_limit=16)
    live.feed(b"line 1\n")
    first = live.read(0)
    live.feed(b"line 2\n")
    second = live.read(first.offset)

    assert (first.text, first.offset, first.gap) == ("line 1\n", 7, 0)
    assert (second.text, second.offset, second.gap, second.total) == ("line 2\n", 14, 0, 14)
    assert live.read(second.offset).text == ""


def test_a_follower_that_fell_behind_gets_the_tail_and_the_size_of_the_gap() -> None:
    live = LiveOutput(head_limit=4, tail_limit=6)
    live.feed(b"0123456789abcdefghij")  # 20 bytes: head 0123, tail efghij

    late = live.read(10)
    from_start = live.read(0)

    assert (late.text, late.gap, late.offset) == ("efghij", 4, 20)
    assert (from_start.text, from_start.gap, from_start.gap_at) == ("0123efghij", 10, 4)
    assert from_start.marked == "0123\n[... 10 bytes not kept ...]\nefghij"
    assert live.read(2).text == "23efghij" and live.read(2).gap == 10


def test_head_and_tail_join_without_a_gap_while_everything_fits() -> None:
    live = LiveOutput(head_limit=4, tail_limit=8)
    live.feed(b"0123456789")  # head 0123, tail 23456789: contiguous

    assert live.read(0).text == "0123456789"
    assert live.read(0).gap == 0
    assert live.read(3).text == "3456789"


def test_a_character_split_between_chunks_is_held_back_until_it_is_whole() -> None:
    live = LiveOutput()
    euro = "€".encode()  # 3 bytes
    live.feed(b"price " + euro[:2])
    partial = live.read(0)
    live.feed(euro[2:] + b"\n")
    rest = live.read(partial.offset)

    assert (partial.text, partial.offset) == ("price ", 6)
    assert rest.text == "€\n"
    assert live.read(0, final=True).text == "price €\n"


def test_text_after_a_gap_never_starts_inside_a_character() -> None:
    live = LiveOutput(head_limit=0, tail_limit=4)
    live.feed(b"x" * 10 + "é".encode() + b"ab")
    live.feed("ü".encode() + b"z")  # the kept tail, 4 bytes: "b", "ü" (2 bytes), "z"

    chunk = live.read(0)
    assert "\ufffd" not in chunk.text
    assert chunk.text.endswith("üz")
    assert chunk.offset == live.total_bytes
    assert chunk.gap + len(chunk.text.encode()) == live.total_bytes


@pytest.mark.parametrize("chunk", [13, 4096, 1 << 20])
def test_memory_is_bounded_by_the_limits_whatever_is_fed(chunk: int) -> None:
    live = LiveOutput(head_limit=100, tail_limit=1000)
    data = bytes(range(256)) * (chunk // 256 + 1)
    for _ in range(max(1, 3_000_000 // chunk)):
        live.feed(data[:chunk])

    assert len(live._head) <= 100 and len(live._tail) <= 1000
    assert live.total_bytes == chunk * max(1, 3_000_000 // chunk)
    assert live.read(0).gap == live.total_bytes - 1100


def test_the_tee_feeds_the_record_and_the_live_buffer() -> None:
    record, live = BoundedOutput(4), LiveOutput()
    sink = tee(record, live)
    sink.feed(b"abcdefgh")

    assert isinstance(sink, Tee)
    assert (record.excerpt().head, record.excerpt().tail) == ("abcd", "efgh")
    assert live.read(0).text == "abcdefgh"
    assert tee(record, None) is record


async def test_a_stop_request_interrupts_the_wait_and_nothing_else_does() -> None:
    live = LiveOutput()
    assert await unless_stopped(asyncio.sleep(0, result="done"), live) == "done"
    asyncio.get_running_loop().call_later(0.01, live.request_stop)
    with pytest.raises(StopRequested):
        await unless_stopped(asyncio.sleep(30), live)
    assert live.stop_requested
    assert await unless_stopped(asyncio.sleep(0, result="no live"), None) == "no live"


def test_a_tail_that_starts_inside_a_character_drops_the_pieces() -> None:
    live = LiveOutput(head_limit=0, tail_limit=3)
    live.feed(b"abc" + "€".encode() + b"z")  # the kept tail: the last 2 bytes of "€", "z"

    chunk = live.read(0)
    assert chunk.text == "z"
    assert "\ufffd" not in chunk.text
    assert chunk.gap == live.total_bytes - 1


async def test_a_timeout_or_a_cancel_around_the_wait_stays_what_it_is() -> None:
    live = LiveOutput()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.01):
            await unless_stopped(asyncio.sleep(30), live)
    waiting = asyncio.create_task(unless_stopped(asyncio.sleep(30), live))
    await asyncio.sleep(0.01)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    # Neither left its stop callback behind, and the stop still works after them.
    assert live._on_stop == []
    asyncio.get_running_loop().call_later(0.01, live.request_stop)
    with pytest.raises(StopRequested):
        await unless_stopped(asyncio.sleep(30), live)
    assert live._on_stop == []
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0  # the stop's cancellation taken back


async def test_a_stop_requested_before_the_wait_ends_it_at_once() -> None:
    live = LiveOutput()
    live.request_stop()
    with pytest.raises(StopRequested):
        await unless_stopped(asyncio.sleep(30), live)
    task = asyncio.current_task()
    assert task is not None and task.cancelling() == 0  # no cancellation left pending
