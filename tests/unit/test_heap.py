"""heap.settle(): the start-up's garbage is collected, what is left is never walked again."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from fleetcron import heap


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


#: The interpreter's thresholds as a process starts (the test run settles its own heap).
STARTING_THRESHOLDS = (700, 10, 10)


@pytest.fixture
def unfrozen() -> Iterator[None]:
    """The collector as a process starts: nothing frozen, the interpreter's thresholds; as
    it was after the test."""
    thresholds = gc.get_threshold()
    was_frozen = gc.get_freeze_count() > 0
    gc.unfreeze()
    gc.set_threshold(*STARTING_THRESHOLDS)
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)
    if was_frozen:
        gc.freeze()


def test_settle_collects_startup_garbage_and_freezes_the_rest(unfrozen: None) -> None:
    # A cycle only the collector frees, and an object the process keeps.
    a, b = Node(), Node()
    a.other, b.other = b, a
    garbage = weakref.ref(a)
    del a, b
    kept = Node()
    assert garbage() is not None  # not freed yet: only a collection frees a cycle
    assert gc.get_freeze_count() == 0

    heap.settle()

    assert garbage() is None
    assert gc.get_freeze_count() > 0
    # What is kept is out of every generation a collection walks.
    assert not any(o is kept for o in gc.get_objects())


def test_without_settle_the_kept_objects_are_walked(unfrozen: None) -> None:
    """The control: unsettled, the same object is among those a full collection walks."""
    kept = Node()
    gc.collect()
    assert any(o is kept for o in gc.get_objects())


def test_settle_collects_young_objects_less_often(unfrozen: None) -> None:
    """Run objects that live a second are freed by reference counting before a young
    collection promotes them; the older generations keep their thresholds."""
    before = gc.get_threshold()
    assert before[0] < heap.YOUNG_THRESHOLD  # the control: Python's default is lower

    heap.settle()

    assert gc.get_threshold() == (heap.YOUNG_THRESHOLD, before[1], before[2])
