"""TargetKind, TargetSpec and Topology: the stored values stay the strings they were, and
a spec's fields are checked in one place, each problem naming its field."""

from __future__ import annotations

import pytest

from fleetcron.cli.target_cmd import edit as target_edit
from fleetcron.config import Settings
from fleetcron.core.targets import KIND_CHECK_SQL, TargetKind, TargetSpec
from fleetcron.core.topology import Topology
from fleetcron.errors import InvalidInput

KEY = b"-----BEGIN OPENSSH PRIVATE KEY-----\n"


def test_the_kinds_are_the_strings_the_column_stores() -> None:
    assert [kind.value for kind in TargetKind] == ["ssh", "local", "jump"]
    assert KIND_CHECK_SQL == "kind IN ('ssh', 'local', 'jump')"


def test_a_jump_host_is_checked_like_an_ssh_target_and_via_is_checked() -> None:
    spec = TargetSpec(
        "b1", TargetKind.JUMP, host="bastion", user="fleet", private_key=b"k", via=" b0 "
    )
    checked = spec.checked()
    assert (checked.kind, checked.host, checked.via) == (TargetKind.JUMP, "bastion", "b0")
    with pytest.raises(InvalidInput, match="via: target b1 cannot be its own jump host"):
        TargetSpec("b1", TargetKind.JUMP, host="h", user="u", private_key=b"k", via="b1").checked()
    with pytest.raises(InvalidInput, match="via: a local target") as info:
        TargetSpec("l1", TargetKind.LOCAL, via="b1").checked()
    assert info.value.field == "via"
    # Control: no via (or an empty one) is reached directly.
    assert TargetSpec("t1", host="h", user="u", private_key=b"k", via="").checked().via is None


def test_the_topologies_are_the_strings_the_setting_takes() -> None:
    assert [t.value for t in Topology] == ["shared-database", "replicated-pair"]
    assert Settings.model_fields["topology"].default is Topology.SHARED_DATABASE


def test_a_typed_kind_that_is_none_of_them_is_refused_naming_the_field() -> None:
    with pytest.raises(InvalidInput, match="kind: 'sftp' is not one of ssh, local") as caught:
        TargetKind.parse("sftp")

    assert caught.value.field == "kind"
    assert TargetKind.parse("local") is TargetKind.LOCAL


def test_the_cli_offers_the_kinds_by_their_stored_names() -> None:
    [kind] = [p for p in target_edit.params if p.name == "kind"]

    # A choice of enum members would match their names (SSH, LOCAL), not what users type.
    assert [kind.type.convert(typed, None, None) for typed in ("ssh", "local")] == ["ssh", "local"]


def test_an_ssh_spec_is_checked_and_normalized() -> None:
    spec = TargetSpec(
        "web1", host="web1.example", user="deploy", private_key=KEY, labels=["env=prod"]
    )

    fields = spec.checked()

    assert (fields.kind, fields.host, fields.port, fields.user) == (
        TargetKind.SSH,
        "web1.example",
        22,
        "deploy",
    )
    assert fields.labels == {"env": "prod"}


def test_an_ssh_spec_names_the_first_missing_field() -> None:
    with pytest.raises(InvalidInput, match=r"user: an ssh target needs .* \(missing: user, key\)"):
        TargetSpec("web1", host="web1.example").checked()


def test_a_local_spec_takes_no_connection() -> None:
    assert TargetSpec("here", TargetKind.LOCAL).checked().host is None

    with pytest.raises(InvalidInput, match="kind: a local target takes no host, user or key"):
        TargetSpec("here", TargetKind.LOCAL, host="elsewhere").checked()


def test_the_name_is_checked_before_the_connection() -> None:
    with pytest.raises(InvalidInput) as caught:
        TargetSpec("new", host="").checked()

    assert caught.value.field == "name"
