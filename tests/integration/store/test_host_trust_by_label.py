"""Host trust chosen by label: a host CA attached to a label selector, against real
OpenSSH with host certificates made by ``ssh-keygen -s``. The target's own host CA wins
over a label's, which wins over a pinned key; a bad CA or selector saves nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from fixtures.sshd import ClientKey, SshServer, new_ca
from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetSpec
from fleetcron.errors import Conflict, HostKeyMismatch, InvalidInput, NotFound, PermissionDenied
from fleetcron.services.targets import edit as targets
from fleetcron.services.targets.trust import CA_TRUSTED, PINNED, trust_states
from fleetcron.services.targets.trust_rules import (
    add_trust_rule,
    remove_trust_rule,
    trust_rules,
)
from fleetcron.store.schema import AuditEvent, HostTrustRule, Target
from integration.store.test_host_ca import certified_sshd

pytestmark = pytest.mark.sshd


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    return new_ca(tmp_path_factory.mktemp("label-ca"))


@pytest.fixture(scope="module")
def signed(
    tmp_path_factory: pytest.TempPathFactory, sshd_client_key: ClientKey, ca: tuple[Path, str]
) -> Iterator[SshServer]:
    yield from certified_sshd(
        tmp_path_factory.mktemp("signed"), sshd_client_key, ca, principals="127.0.0.1"
    )


def spec(server: SshServer, name: str, *labels: str, host_ca: str | None = None) -> TargetSpec:
    return TargetSpec(
        name,
        host=server.host,
        port=server.port,
        user=server.user,
        private_key=server.client_private_key.encode(),
        labels=list(labels),
        host_ca=host_ca,
    )


def trust_of(app: App, actor: Actor) -> dict[str, tuple[str, str | None]]:
    return {s.name: (s.state, s.ca_from) for s in trust_states(app, actor) if s.name != "b"}


def test_a_target_matching_the_label_is_paired_by_the_labels_ca_without_a_key(
    app: App, operator: Actor, signed: SshServer, ca: tuple[Path, str]
) -> None:
    view = add_trust_rule(app, operator, "site=paris", f"@cert-authority * {ca[1]}")
    assert view.selector == "site=paris" and view.targets == ()

    result = targets.add_target(app, operator, spec(signed, "pbx1", "site=paris"))

    assert result.target.paired and result.target.host_key is None
    assert trust_of(app, operator) == {"pbx1": (CA_TRUSTED, "label site=paris")}
    assert [v.targets for v in trust_rules(app, operator)] == [("pbx1",)]
    # The control: without the label there is no CA and no key to pin.
    with pytest.raises(InvalidInput, match="host key"):
        targets.add_target(app, operator, spec(signed, "pbx2", "site=lyon"), allow_same_host=True)


def test_the_label_wins_over_a_pinned_key_and_the_targets_own_ca_over_the_label(
    app: App,
    operator: Actor,
    sshd: SshServer,
    signed: SshServer,
    ca: tuple[Path, str],
    tmp_path: Path,
) -> None:
    """A pinned target gains the CA when it is labelled (its unsigned host is then refused
    at the next check) and goes back to its key when the rule goes; a target with its own
    CA keeps it."""
    targets.add_target(app, operator, spec(sshd, "plain", "site=paris"), trust_on_first_use=True)
    _, other = new_ca(tmp_path, "own_ca")
    own = spec(signed, "own", "site=paris", host_ca=other)
    targets.add_target(app, operator, own, verify=False, allow_same_host=True)
    assert trust_of(app, operator) == {
        "own": (CA_TRUSTED, "target"),
        "plain": (PINNED, None),
    }

    view = add_trust_rule(app, operator, "site=paris", ca[1])

    assert view.targets == ("plain",)  # "own" keeps its own CA
    assert trust_of(app, operator) == {
        "own": (CA_TRUSTED, "target"),
        "plain": (CA_TRUSTED, "label site=paris"),
    }
    with pytest.raises(HostKeyMismatch, match="no valid certificate from its host CA"):
        targets.pair_target(app, operator, "plain")
    assert remove_trust_rule(app, operator, "site=paris") == ["plain"]
    assert trust_of(app, operator)["plain"] == (PINNED, None)
    targets.pair_target(app, operator, "plain")  # its pinned key is trusted again
    with app.db.read() as session:
        own_row = session.scalars(select(Target).where(Target.name == "own")).one()
        assert own_row.host_ca == other and own_row.host_ca_rule_id is None


def test_relabelling_moves_a_target_in_and_out_of_the_labels_trust(
    app: App, operator: Actor, sshd: SshServer, ca: tuple[Path, str]
) -> None:
    add_trust_rule(app, operator, "role=pbx,site=paris", ca[1])
    targets.add_target(app, operator, spec(sshd, "t1", "site=paris"), trust_on_first_use=True)
    assert trust_of(app, operator) == {"t1": (PINNED, None)}  # one label of two: no match
    targets.label_target(app, operator, "t1", ["role=pbx"])
    assert trust_of(app, operator) == {"t1": (CA_TRUSTED, "label role=pbx,site=paris")}
    targets.label_target(app, operator, "t1", ["site="])
    assert trust_of(app, operator) == {"t1": (PINNED, None)}


@pytest.mark.parametrize(
    ("selector", "ca_text", "field", "message"),
    [
        ("site=paris", "not a key", "ca", "ca: "),
        ("site=paris", "@revoked ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA", "ca", "ca: "),
        ("site", "CA", "label", "label: 'site' is not a label selector"),
        ("", "CA", "label", "label: a host CA by label needs a selector"),
    ],
    ids=["not-a-key", "revoked-only", "no-value", "empty"],
)
def test_bad_input_names_the_field_and_saves_nothing(
    app: App,
    operator: Actor,
    ca: tuple[Path, str],
    selector: str,
    ca_text: str,
    field: str,
    message: str,
) -> None:
    with pytest.raises(InvalidInput) as refused:
        add_trust_rule(app, operator, selector, ca_text.replace("CA", ca[1]))
    assert refused.value.field == field and str(refused.value).startswith(message)
    with app.db.read() as session:
        assert session.scalars(select(HostTrustRule)).all() == []
        [event] = session.scalars(
            select(AuditEvent).where(AuditEvent.action == "target.trust_ca_add")
        ).all()
    assert event.success is False and event.actor == operator.name


def test_one_ca_per_selector_and_a_missing_one_is_named(
    app: App, operator: Actor, viewer: Actor, ca: tuple[Path, str]
) -> None:
    add_trust_rule(app, operator, "site=paris", ca[1])
    with pytest.raises(Conflict, match="already attached to site=paris"):
        add_trust_rule(app, operator, "site = paris", ca[1])
    with pytest.raises(NotFound, match="site=lyon"):
        remove_trust_rule(app, operator, "site=lyon")
    with pytest.raises(PermissionDenied, match="may not edit targets"):
        add_trust_rule(app, viewer, "site=lyon", ca[1])
    with app.db.read() as session:
        [event] = session.scalars(
            select(AuditEvent).where(
                AuditEvent.action == "target.trust_ca_add", AuditEvent.success.is_(True)
            )
        ).all()
    assert event.detail["selector"] == "site=paris"
    assert event.detail["ca"] == [v.ca_fingerprints[0] for v in trust_rules(app, operator)]
