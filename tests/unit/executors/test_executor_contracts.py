"""Pure parts of the executors: bounded output, marker stripping, key lines, requests."""

from __future__ import annotations

import base64
import hashlib
import string

import pytest

from fleetcron.errors import InvalidInput
from fleetcron.executors import ExecRequest, SshTarget, fingerprint, normalize_key_line
from fleetcron.executors.output import BoundedOutput, MarkerLineSplitter

# A real ed25519 public key (generated once with ssh-keygen; only the public half).
KEY_LINE = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE8KJQMAgv0BMhOfH8W42VZgWhrqG2xDTsnOf9APF55w"


def fed(limit: int, *chunks: bytes) -> BoundedOutput:
    out = BoundedOutput(limit)
    for chunk in chunks:
        out.feed(chunk)
    return out


def test_it_keeps_short_output_whole_in_the_head() -> None:
    excerpt = fed(8, b"abc", b"de").excerpt()
    assert (excerpt.head, excerpt.tail, excerpt.total_bytes, excerpt.truncated) == (
        "abcde",
        "",
        5,
        False,
    )


def test_it_keeps_output_of_up_to_twice_the_limit_without_truncating() -> None:
    excerpt = fed(4, b"0123456789"[:8]).excerpt()
    assert (excerpt.head, excerpt.tail, excerpt.truncated) == ("0123", "4567", False)


def test_it_keeps_the_first_and_last_bytes_of_long_output() -> None:
    excerpt = fed(4, b"0123", b"45", b"6789ab", b"c").excerpt()
    assert (excerpt.head, excerpt.tail, excerpt.total_bytes, excerpt.truncated) == (
        "0123",
        "9abc",
        13,
        True,
    )


@pytest.mark.parametrize("chunk_size", [1, 3, 7, 50, 100, 1000])
def test_it_keeps_the_same_head_and_tail_however_the_output_is_chunked(chunk_size: int) -> None:
    data = string.ascii_letters.encode() * 20
    chunks = [data[i : i + chunk_size] for i in range(0, len(data), chunk_size)]
    excerpt = fed(50, *chunks).excerpt()
    assert (excerpt.head, excerpt.tail) == (data[:50].decode(), data[-50:].decode())


def test_it_counts_bytes_it_does_not_keep() -> None:
    excerpt = fed(16, *(b"x" * 1000 for _ in range(1000))).excerpt()
    assert (len(excerpt.head), len(excerpt.tail), excerpt.total_bytes) == (16, 16, 1_000_000)


def test_it_keeps_nothing_with_a_zero_limit() -> None:
    excerpt = fed(0, b"abc").excerpt()
    assert (excerpt.head, excerpt.tail, excerpt.total_bytes, excerpt.truncated) == ("", "", 3, True)


def test_it_replaces_invalid_utf8_instead_of_failing() -> None:
    assert fed(8, b"ok\xff").excerpt().head == "ok\ufffd"


def test_the_excerpt_text_marks_the_omitted_bytes() -> None:
    assert fed(2, b"abcdefgh").excerpt().text == "ab\n[... 4 bytes omitted ...]\ngh"


def test_it_strips_the_marker_line_and_reports_its_value() -> None:
    sink = BoundedOutput(100)
    splitter = MarkerLineSplitter(b"@pgid=", sink)
    for chunk in (b"noise\n@pg", b"id=42", b"\nreal stderr\n"):
        splitter.feed(chunk)
    splitter.flush()
    assert (splitter.value, sink.excerpt().head) == (b"42", "noise\nreal stderr\n")


def test_it_forwards_everything_when_the_marker_never_comes() -> None:
    sink = BoundedOutput(100)
    splitter = MarkerLineSplitter(b"@pgid=", sink, max_scan=4)
    splitter.feed(b"abcdef")
    splitter.feed(b"gh")
    assert (splitter.value, sink.excerpt().head) == (None, "abcdefgh")


def test_it_forwards_held_back_bytes_when_the_stream_ends() -> None:
    sink = BoundedOutput(100)
    splitter = MarkerLineSplitter(b"@pgid=", sink)
    splitter.feed(b"partial")
    splitter.flush()
    assert sink.excerpt().head == "partial"


def test_the_fingerprint_is_the_unpadded_base64_sha256_of_the_key_blob() -> None:
    blob = base64.b64decode(KEY_LINE.split()[1])
    expected = base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    assert fingerprint(KEY_LINE + " a comment") == f"SHA256:{expected}"


def test_it_drops_the_comment_of_a_key_line() -> None:
    assert normalize_key_line(KEY_LINE + " root@host") == KEY_LINE


@pytest.mark.parametrize(
    "line",
    ["", "ssh-ed25519", "ssh-ed25519 not-base64!", "ssh-rsa " + KEY_LINE.split()[1]],
)
def test_it_rejects_a_malformed_host_key_line(line: str) -> None:
    with pytest.raises(InvalidInput) as info:
        fingerprint(line)
    assert info.value.field == "host_key"


def test_it_rejects_an_empty_command() -> None:
    with pytest.raises(InvalidInput) as info:
        ExecRequest("  ")
    assert info.value.field == "command"


def test_it_rejects_a_zero_timeout() -> None:
    with pytest.raises(InvalidInput) as info:
        ExecRequest("true", timeout_s=0)
    assert (info.value.field, info.value.value) == ("timeout_s", 0)


def test_it_rejects_a_negative_output_limit() -> None:
    with pytest.raises(InvalidInput) as info:
        ExecRequest("true", output_limit=-1)
    assert info.value.field == "output_limit"


def test_it_rejects_an_environment_variable_name_with_a_dash() -> None:
    with pytest.raises(InvalidInput) as info:
        ExecRequest("true", env={"FLEETCRON-JOB": "x"})
    assert (info.value.field, info.value.value) == ("env", "FLEETCRON-JOB")


def test_it_rejects_a_target_port_out_of_range() -> None:
    with pytest.raises(InvalidInput) as info:
        SshTarget("t", "127.0.0.1", 70000, "root", "key", KEY_LINE)
    assert (info.value.field, info.value.value) == ("port", 70000)


def test_a_target_repr_never_shows_the_private_key() -> None:
    target = SshTarget("t", "127.0.0.1", 22, "root", "-----BEGIN SECRET-----", KEY_LINE)
    assert "SECRET" not in repr(target)


@pytest.mark.parametrize("budget", [0, -1.0, float("inf"), float("nan")])
def test_it_rejects_a_watchdog_budget_that_is_not_a_positive_number(budget: float) -> None:
    with pytest.raises(InvalidInput) as info:
        ExecRequest("true", watchdog_s=budget)
    assert info.value.field == "watchdog_s"


def test_the_watchdog_budget_defaults_to_the_timeout_plus_the_kill_grace() -> None:
    assert ExecRequest("true", timeout_s=10).watchdog_budget(5) == 15
    assert ExecRequest("true", timeout_s=10, watchdog_s=3.5).watchdog_budget(5) == 3.5


@pytest.mark.parametrize("tag", ["run_id", "generation"])
def test_it_rejects_a_negative_run_tag(tag: str) -> None:
    with pytest.raises(InvalidInput) as info:
        ExecRequest("true", **{tag: -1})  # type: ignore[arg-type]
    assert (info.value.field, info.value.value) == (tag, -1)
