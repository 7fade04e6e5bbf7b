"""Signed envelopes between nodes: what is accepted, and every reason a message is refused."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from fleetcron.coordination.signing import (
    ENVELOPE_FIELDS,
    MemoryNonceStore,
    accepted_secrets,
    key_id,
    response_for,
    sign,
    verify,
    verify_response,
)
from fleetcron.errors import CoordinationError, InvalidInput

SECRET = b"current coordination secret 0001"
PREVIOUS = b"previous coordination secret 002"
OTHER = b"another cluster's secret ...0003"
NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
PAYLOAD = {"target": "7301234567890123456", "generation": 4, "note": "grüße"}


def accept(
    envelope: Any,
    *,
    secrets: list[bytes] | None = None,
    purpose: str = "handoff.prepare",
    now: datetime = NOW,
    seen: MemoryNonceStore | None = None,
) -> dict[str, Any]:
    return verify(
        envelope,
        secrets=[SECRET] if secrets is None else secrets,
        purpose=purpose,
        now=now,
        seen=MemoryNonceStore() if seen is None else seen,
    )


def signed(**changes: Any) -> dict[str, Any]:
    envelope = sign(SECRET, "handoff.prepare", PAYLOAD, now=NOW)
    envelope.update(changes)
    return envelope


# signing


def test_a_signed_message_verifies_and_gives_back_its_payload() -> None:
    assert accept(signed()) == PAYLOAD


def test_a_signed_message_verifies_after_travelling_as_json() -> None:
    wire = json.dumps(signed()).encode()
    assert accept(json.loads(wire)) == PAYLOAD


def test_the_envelope_holds_exactly_the_six_fields() -> None:
    envelope = signed()
    assert set(envelope) == ENVELOPE_FIELDS
    assert envelope["purpose"] == "handoff.prepare"
    assert envelope["ts"] == "2025-03-01T12:00:00.000000Z"


def test_the_key_id_is_the_start_of_the_secrets_sha256() -> None:
    assert signed()["key_id"] == hashlib.sha256(SECRET).hexdigest()[:8] == key_id(SECRET)


def test_the_signature_is_an_hmac_of_the_canonical_json_of_the_other_fields() -> None:
    envelope = signed()
    body = {name: value for name, value in envelope.items() if name != "sig"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    digest = hmac.new(SECRET, canonical.encode("utf-8"), hashlib.sha256).digest()
    assert envelope["sig"] == base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def test_each_message_gets_a_fresh_nonce_unless_one_is_given() -> None:
    first, second = signed(), signed()
    assert first["nonce"] != second["nonce"]
    given_nonce = "n" * 24
    assert sign(SECRET, "status", {}, now=NOW, nonce=given_nonce)["nonce"] == given_nonce


def test_the_envelope_payload_is_the_json_form_the_receiver_will_see() -> None:
    envelope = sign(SECRET, "status", {"pair": (1, 2)}, now=NOW)
    assert envelope["payload"] == {"pair": [1, 2]}
    assert accept(envelope, purpose="status") == {"pair": [1, 2]}


def test_a_timestamp_in_another_zone_is_written_in_utc() -> None:
    paris = NOW.astimezone(ZoneInfo("Europe/Paris"))
    assert sign(SECRET, "status", {}, now=paris)["ts"] == "2025-03-01T12:00:00.000000Z"


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ((b"too short", "status", {}), "coordination secret"),
        ((SECRET, "Not A Purpose", {}), "purpose"),
        ((SECRET, "", {}), "purpose"),
        ((SECRET, "status", {"x": float("nan")}), "payload"),
        ((SECRET, "status", {"x": object()}), "payload"),
        ((SECRET, "status", ["not", "a", "mapping"]), "payload"),
    ],
)
def test_it_refuses_to_sign_bad_input_and_names_the_field(
    args: tuple[bytes, str, Any], field: str
) -> None:
    with pytest.raises(InvalidInput) as info:
        sign(*args, now=NOW)
    assert info.value.field == field


def test_it_refuses_to_sign_with_a_malformed_nonce() -> None:
    with pytest.raises(InvalidInput) as info:
        sign(SECRET, "status", {}, now=NOW, nonce="short")
    assert info.value.field == "nonce"


def test_it_refuses_to_sign_at_a_naive_time() -> None:
    with pytest.raises(InvalidInput) as info:
        sign(SECRET, "status", {}, now=datetime(2025, 3, 1, 12, 0))
    assert info.value.field == "now"


# tampering


@pytest.mark.parametrize(
    "change",
    [
        {"payload": {**PAYLOAD, "generation": 5}},
        {"purpose": "handoff.commit"},
        {"ts": "2025-03-01T12:00:00.000001Z"},
        {"nonce": "A" * 24},
    ],
    ids=["payload", "purpose", "ts", "nonce"],
)
def test_a_tampered_field_is_refused_as_a_bad_signature(change: dict[str, Any]) -> None:
    envelope = signed(**change)
    purpose = envelope["purpose"]
    with pytest.raises(CoordinationError, match="bad signature"):
        accept(envelope, purpose=purpose)


def test_a_tampered_signature_is_refused_as_a_bad_signature() -> None:
    envelope = signed()
    envelope["sig"] = ("B" if envelope["sig"][0] != "B" else "C") + envelope["sig"][1:]
    with pytest.raises(CoordinationError, match="bad signature"):
        accept(envelope)


def test_a_message_signed_for_another_purpose_is_refused() -> None:
    response = sign(SECRET, "handoff.prepared", PAYLOAD, now=NOW)
    with pytest.raises(CoordinationError, match=r"wrong purpose: expected 'handoff\.prepare'"):
        accept(response, purpose="handoff.prepare")


def test_a_message_signed_with_an_unknown_secret_is_refused_by_its_key_id() -> None:
    envelope = sign(OTHER, "handoff.prepare", PAYLOAD, now=NOW)
    with pytest.raises(CoordinationError, match=f"unknown key id '{key_id(OTHER)}'"):
        accept(envelope)


def test_a_relabelled_key_id_is_refused_as_a_bad_signature() -> None:
    envelope = sign(OTHER, "handoff.prepare", PAYLOAD, now=NOW)
    envelope["key_id"] = key_id(SECRET)
    with pytest.raises(CoordinationError, match="bad signature"):
        accept(envelope)


def test_a_node_without_any_secret_refuses_every_message() -> None:
    with pytest.raises(CoordinationError, match="no coordination secret"):
        accept(signed(), secrets=[])


# replay and clocks


def test_the_same_envelope_is_refused_the_second_time() -> None:
    seen = MemoryNonceStore()
    envelope = signed()
    accept(envelope, seen=seen)
    with pytest.raises(CoordinationError, match="replay"):
        accept(envelope, seen=seen)


def test_a_refused_forgery_does_not_burn_the_nonce_of_the_genuine_message() -> None:
    seen = MemoryNonceStore()
    genuine = signed()
    forged = {**genuine, "sig": "A" * 43}
    with pytest.raises(CoordinationError, match="bad signature"):
        accept(forged, seen=seen)
    assert len(seen) == 0
    assert accept(genuine, seen=seen) == PAYLOAD


@pytest.mark.parametrize(
    ("offset", "words"),
    [(timedelta(seconds=61), "61 s old"), (timedelta(seconds=-61), "61 s in the future")],
    ids=["61s-old", "61s-ahead"],
)
def test_a_timestamp_61_seconds_away_is_refused(offset: timedelta, words: str) -> None:
    with pytest.raises(CoordinationError, match=f"{words}, outside the ±60 s window"):
        accept(signed(), now=NOW + offset)


@pytest.mark.parametrize(
    "offset",
    [timedelta(seconds=59), timedelta(seconds=-59), timedelta(seconds=60)],
    ids=["59s-old", "59s-ahead", "60s-old"],
)
def test_a_timestamp_within_the_window_is_accepted(offset: timedelta) -> None:
    assert accept(signed(), now=NOW + offset) == PAYLOAD


def test_a_wider_window_accepts_more_skew() -> None:
    payload = verify(
        signed(),
        secrets=[SECRET],
        purpose="handoff.prepare",
        now=NOW + timedelta(seconds=100),
        window=timedelta(seconds=120),
        seen=MemoryNonceStore(timedelta(seconds=120)),
    )
    assert payload == PAYLOAD


# rotation


def test_the_previous_secret_is_accepted_inside_the_grace_window() -> None:
    rotated_at = NOW - timedelta(hours=23)
    envelope = sign(PREVIOUS, "handoff.prepare", PAYLOAD, now=NOW)
    secrets = accepted_secrets(SECRET, PREVIOUS, rotated_at, NOW)
    assert accept(envelope, secrets=secrets) == PAYLOAD


def test_the_previous_secret_is_refused_after_the_grace_window() -> None:
    rotated_at = NOW - timedelta(hours=24)
    envelope = sign(PREVIOUS, "handoff.prepare", PAYLOAD, now=NOW)
    secrets = accepted_secrets(SECRET, PREVIOUS, rotated_at, NOW)
    with pytest.raises(CoordinationError, match="unknown key id"):
        accept(envelope, secrets=secrets)


def test_the_current_secret_comes_first_and_alone_without_a_previous_one() -> None:
    assert accepted_secrets(SECRET, None, None, NOW) == [SECRET]
    assert accepted_secrets(SECRET, PREVIOUS, NOW, NOW) == [SECRET, PREVIOUS]


def test_a_previous_secret_without_a_rotation_time_is_refused() -> None:
    with pytest.raises(InvalidInput) as info:
        accepted_secrets(SECRET, PREVIOUS, None, NOW)
    assert info.value.field == "rotated_at"


def test_a_custom_grace_period_ends_the_previous_secret_sooner() -> None:
    rotated_at = NOW - timedelta(hours=2)
    assert accepted_secrets(SECRET, PREVIOUS, rotated_at, NOW, grace=timedelta(hours=1)) == [SECRET]


# responses


def test_a_response_bound_to_its_request_verifies_without_the_binding_field() -> None:
    request = signed()
    response = response_for(request, SECRET, "handoff.prepared", {"state": "draining"}, now=NOW)
    assert response["payload"]["request_nonce"] == request["nonce"]
    payload = verify_response(
        response,
        request_nonce=request["nonce"],
        secrets=[SECRET],
        purpose="handoff.prepared",
        now=NOW,
        seen=MemoryNonceStore(),
    )
    assert payload == {"state": "draining"}


def test_a_response_bound_to_another_request_is_refused() -> None:
    mine, other = signed(), signed()
    response = response_for(other, SECRET, "handoff.prepared", {"state": "draining"}, now=NOW)
    with pytest.raises(CoordinationError, match="answers another request"):
        verify_response(
            response,
            request_nonce=mine["nonce"],
            secrets=[SECRET],
            purpose="handoff.prepared",
            now=NOW,
            seen=MemoryNonceStore(),
        )


def test_a_response_that_names_no_request_is_refused() -> None:
    unbound = sign(SECRET, "handoff.prepared", {"state": "draining"}, now=NOW)
    with pytest.raises(CoordinationError, match="does not name the request"):
        verify_response(
            unbound,
            request_nonce=signed()["nonce"],
            secrets=[SECRET],
            purpose="handoff.prepared",
            now=NOW,
            seen=MemoryNonceStore(),
        )


def test_a_response_payload_may_not_claim_the_binding_field_itself() -> None:
    with pytest.raises(InvalidInput) as info:
        response_for(signed(), SECRET, "handoff.prepared", {"request_nonce": "x" * 24}, now=NOW)
    assert info.value.field == "payload"


def test_a_response_needs_a_request_with_a_nonce() -> None:
    with pytest.raises(InvalidInput) as info:
        response_for({"payload": {}}, SECRET, "handoff.prepared", {}, now=NOW)
    assert info.value.field == "request_envelope"


# malformed envelopes


@pytest.mark.parametrize(
    ("envelope", "words"),
    [
        ([], "expected a JSON object, got list"),
        ({k: v for k, v in signed().items() if k != "sig"}, "missing field(s) sig"),
        ({**signed(), "extra": 1}, "unexpected field(s) 'extra'"),
        (signed(payload=[1]), "field payload is not a JSON object"),
        (signed(nonce=12345678901234567), "field nonce is not in the expected form"),
        (signed(ts="2025-03-01 12:00:00"), "field ts is not in the expected form"),
        (signed(ts="2025-13-01T12:00:00.000000Z"), "field ts is not a valid time"),
        (signed(key_id="ABCDEF12"), "field key_id is not in the expected form"),
        (signed(sig="not base64url!"), "field sig is not in the expected form"),
        (signed(purpose=None), "field purpose is not in the expected form"),
        (dict[Any, Any](signed()) | {7: "x"}, "unexpected field(s) 7"),
    ],
)
def test_a_malformed_envelope_is_refused_with_what_is_wrong(envelope: Any, words: str) -> None:
    with pytest.raises(CoordinationError, match="malformed envelope") as info:
        accept(envelope)
    assert words in str(info.value)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=50),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner),
    max_leaves=12,
)
ANYTHING = JSON | st.binary() | st.dictionaries(st.integers(), JSON, max_size=3)


@given(JSON)
def test_any_json_value_as_an_envelope_is_refused_with_a_coordination_error(value: Any) -> None:
    with pytest.raises(CoordinationError):
        accept(value)


@given(st.dictionaries(st.sampled_from(sorted(ENVELOPE_FIELDS)), ANYTHING))
def test_any_dict_of_envelope_fields_is_refused_with_a_coordination_error(
    value: dict[str, Any],
) -> None:
    with pytest.raises(CoordinationError):
        accept(value)


@given(st.sampled_from(sorted(ENVELOPE_FIELDS)), ANYTHING)
def test_a_signed_envelope_with_any_one_field_replaced_is_refused_with_a_coordination_error(
    field: str, value: Any
) -> None:
    envelope = signed()
    assume(value != envelope[field])
    envelope[field] = value
    with pytest.raises(CoordinationError):
        accept(envelope)


# the nonce store


def test_the_memory_store_remembers_a_nonce_within_its_retention() -> None:
    store = MemoryNonceStore(timedelta(seconds=60))
    assert store.remember("n1", NOW, NOW)
    assert not store.remember("n1", NOW, NOW + timedelta(seconds=120))


def test_the_memory_store_forgets_nonces_older_than_twice_the_window() -> None:
    store = MemoryNonceStore(timedelta(seconds=60))
    store.remember("old", NOW, NOW)
    later = NOW + timedelta(seconds=121)
    assert store.remember("new", later, later)
    assert len(store) == 1
    assert store.remember("old", NOW, later)  # forgotten; the clock window refuses it anyway


def test_the_memory_store_stays_bounded_under_a_steady_stream_of_messages() -> None:
    store = MemoryNonceStore(timedelta(seconds=60))
    for i in range(10_000):
        at = NOW + timedelta(seconds=i)
        assert store.remember(f"nonce-{i}", at, at)
    assert len(store) <= 121


def test_a_full_memory_store_refuses_rather_than_forgetting_early() -> None:
    store = MemoryNonceStore(timedelta(seconds=60), max_entries=2)
    store.remember("a", NOW, NOW)
    store.remember("b", NOW, NOW)
    with pytest.raises(CoordinationError, match="replays"):
        store.remember("c", NOW, NOW)
    assert not store.remember("a", NOW, NOW)


def test_every_public_name_is_defined() -> None:
    from fleetcron.coordination import signing

    assert all(hasattr(signing, name) for name in signing.__all__)
