"""``--worker-of I/N`` (the argument worker 0 gives the workers it starts): a bad value
names the field, the value and what is allowed."""

from __future__ import annotations

import pytest

from fleetcron.core.members import Worker
from fleetcron.errors import InvalidInput
from fleetcron.scheduler.workers import parse_worker_of


def test_a_worker_of_value_is_read() -> None:
    assert parse_worker_of("1/2") == Worker(1, 2)
    assert parse_worker_of("7/8") == Worker(7, 8)


@pytest.mark.parametrize("value", ["1", "a/2", "2/2", "1/0", "-1/2", "1/2/3", ""])
def test_a_bad_worker_of_is_refused_with_the_field_and_value(value: str) -> None:
    with pytest.raises(InvalidInput) as raised:
        parse_worker_of(value)
    assert raised.value.field == "worker-of"
    assert raised.value.value == value
