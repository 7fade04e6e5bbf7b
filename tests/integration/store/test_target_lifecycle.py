"""The target lifecycle on a real database (SQLite and PostgreSQL) and real sshd servers:
edit with re-validation, re-pinning a changed host key, the maintenance pause, unpair and
re-pair keeping per-job pauses, removal with individual jobs, the same-host check, and the
local-target trust boundary."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from fixtures.app import FakeClock, make_settings
from fixtures.sshd import SshServer
from fleetcron.app import Actor, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.errors import Conflict, HostKeyMismatch, InvalidInput, PermissionDenied
from fleetcron.scheduler.service import policy_from
from fleetcron.services.jobs import edit as jobs
from fleetcron.services.jobs.edit import JobSpec
from fleetcron.services.targets import edit as targets
from fleetcron.services.targets import reads as target_reads
from fleetcron.services.targets.edit import TargetChanges
from fleetcron.store.runs import RunStore
from fleetcron.store.schema import AuditEvent, Job, Run, Target


def minutely(name: str) -> JobSpec:
    """Every minute, a command of its own (the same command twice on a target is refused)."""
    return JobSpec("* * * * *", f"echo {name}")


def add_ssh(
    app: App,
    actor: Actor,
    name: str,
    server: SshServer,
    *,
    host_key: str | None = None,
    timezone: str | None = None,
    verify: bool = True,
    trust_on_first_use: bool = False,
    allow_same_host: bool = False,
) -> targets.PairResult:
    return targets.add_target(
        app,
        actor,
        server.spec(name, host_key=host_key, timezone=timezone),
        verify=verify,
        trust_on_first_use=trust_on_first_use,
        allow_same_host=allow_same_host,
    )


def audit(app: App, action: str) -> list[AuditEvent]:
    with app.db.read() as session:
        return list(
            session.scalars(
                select(AuditEvent).where(AuditEvent.action == action).order_by(AuditEvent.id)
            )
        )


def runs_of(app: App, target: str) -> list[tuple[str, str | None]]:
    with app.db.read() as session:
        rows = session.execute(
            select(Run.status, Run.reason).where(Run.target_name == target).order_by(Run.id)
        )
        return [(status, reason) for status, reason in rows]


def simulate_reinstall(app: App, name: str, server: SshServer) -> None:
    """The target's address now answers with another host key (another sshd)."""
    with app.db.session() as session:
        row = session.scalars(select(Target).where(Target.name == name)).one()
        row.port = server.port


# -- edit -------------------------------------------------------------------------------


@pytest.mark.sshd
def test_editing_a_paired_target_to_a_server_with_another_host_key_is_refused_and_changes_nothing(
    app: App, operator: Actor, sshd: SshServer, sshd_other_host_key: SshServer
) -> None:
    add_ssh(app, operator, "pbx1", sshd, trust_on_first_use=True)

    with pytest.raises(HostKeyMismatch, match=r"target pbx1 was not changed: .*re-pin"):
        targets.edit_target(
            app, operator, "pbx1", TargetChanges(port=sshd_other_host_key.port, notes="moved")
        )

    after, _ = target_reads.show_target(app, operator, "pbx1")
    assert (after.port, after.notes, after.paired) == (sshd.port, "", True)
    [event] = audit(app, "target.edit")
    assert not event.success and "mismatch" in event.detail["error"]


@pytest.mark.sshd
def test_editing_a_paired_target_with_its_new_host_key_checks_it_and_records_both_fingerprints(
    app: App, operator: Actor, sshd: SshServer, sshd_other_host_key: SshServer
) -> None:
    add_ssh(app, operator, "pbx1", sshd, trust_on_first_use=True)

    result = targets.edit_target(
        app,
        operator,
        "pbx1",
        TargetChanges(port=sshd_other_host_key.port, host_key=sshd_other_host_key.host_key_line),
    )

    assert result.verified and not result.unpaired
    assert set(result.changed) == {"port", "host_key"}
    assert result.host_key_fingerprint == sshd_other_host_key.host_key_fingerprint
    assert result.target.paired
    [event] = audit(app, "target.edit")
    assert event.success
    assert event.detail["host_key"]["old"] == sshd.host_key_fingerprint
    assert event.detail["host_key"]["new"] == sshd_other_host_key.host_key_fingerprint


@pytest.mark.sshd
def test_an_unchecked_edit_of_a_paired_target_unpairs_it_and_a_pair_brings_its_jobs_back(
    app: App, operator: Actor, sshd: SshServer
) -> None:
    add_ssh(app, operator, "pbx1", sshd, trust_on_first_use=True)
    jobs.add_job(app, operator, "reload", minutely("reload"), bulk=True)
    jobs.add_job(app, operator, "status", JobSpec("*/5 * * * *", "echo status"), bulk=True)
    jobs.set_enabled(app, operator, "status", False, target="pbx1")

    result = targets.edit_target(app, operator, "pbx1", TargetChanges(port=1), verify=False)

    assert result.unpaired and not result.verified
    assert not result.target.paired
    targets.edit_target(app, operator, "pbx1", TargetChanges(port=sshd.port))
    paired = targets.pair_target(app, operator, "pbx1")
    assert set(paired.extended_jobs) == {"reload", "status"}
    assert paired.kept_disabled == ("status",)


def test_an_unpaired_target_is_saved_as_given_without_connecting(
    app: App, operator: Actor, sshd: SshServer
) -> None:
    targets.add_target(
        app,
        operator,
        TargetSpec(
            "gone",
            host="127.0.0.1",
            port=1,
            user="root",
            private_key=sshd.client_private_key.encode(),
            host_key=sshd.host_key_line,
        ),
        verify=False,
    )

    result = targets.edit_target(
        app, operator, "gone", TargetChanges(host="192.0.2.10", port=2222, user="pbx")
    )

    assert not result.verified and not result.unpaired
    assert (result.target.host, result.target.port, result.target.user) == (
        "192.0.2.10",
        2222,
        "pbx",
    )


def test_editing_labels_replaces_them_and_moves_bulk_jobs(app: App, admin: Actor) -> None:
    targets.add_target(app, admin, TargetSpec("box", TargetKind.LOCAL, labels=["role=pbx"]))
    jobs.add_job(app, admin, "reload", minutely("reload"), bulk=True, selector="role=pbx")

    targets.edit_target(app, admin, "box", TargetChanges(labels=["role=db"], notes="rack 4"))

    box, assignments = target_reads.show_target(app, admin, "box")
    assert (box.labels, box.notes) == ({"role": "db"}, "rack 4")
    assert assignments == []


def test_an_edit_that_changes_nothing_is_refused_naming_the_target(app: App, admin: Actor) -> None:
    targets.add_target(app, admin, TargetSpec("box", TargetKind.LOCAL, notes="same"))

    with pytest.raises(InvalidInput, match="nothing to change on target box"):
        targets.edit_target(app, admin, "box", TargetChanges(notes="same"))


def test_a_bad_port_in_an_edit_names_the_field(app: App, operator: Actor, sshd: SshServer) -> None:
    add_ssh(app, operator, "pbx1", sshd, host_key=sshd.host_key_line, verify=False)

    with pytest.raises(InvalidInput) as raised:
        targets.edit_target(app, operator, "pbx1", TargetChanges(port=70000))

    assert raised.value.field == "port"


# -- re-pin -----------------------------------------------------------------------------


@pytest.mark.sshd
def test_pairing_never_replaces_a_pinned_key_and_says_to_re_pin(
    app: App, operator: Actor, sshd: SshServer, sshd_other_host_key: SshServer
) -> None:
    add_ssh(app, operator, "pbx4", sshd, trust_on_first_use=True)
    simulate_reinstall(app, "pbx4", sshd_other_host_key)

    with pytest.raises(HostKeyMismatch, match=targets.REPIN_ADVICE):
        targets.pair_target(app, operator, "pbx4", trust_on_first_use=True)
    with pytest.raises(Conflict, match=targets.REPIN_ADVICE):
        targets.pair_target(app, operator, "pbx4", host_key=sshd_other_host_key.host_key_line)


@pytest.mark.sshd
def test_a_reinstalled_server_is_re_pinned_with_both_fingerprints_shown_and_audited(
    app: App, operator: Actor, sshd: SshServer, sshd_other_host_key: SshServer
) -> None:
    add_ssh(app, operator, "pbx4", sshd, trust_on_first_use=True)
    simulate_reinstall(app, "pbx4", sshd_other_host_key)

    plan = targets.plan_repin(app, operator, "pbx4", trust_on_first_use=True)
    assert (plan.old_fingerprint, plan.new_fingerprint) == (
        sshd.host_key_fingerprint,
        sshd_other_host_key.host_key_fingerprint,
    )
    assert audit(app, "target.repin") == []  # planning writes nothing

    repinned = targets.repin_target(app, operator, plan)

    assert repinned.host_key == sshd_other_host_key.host_key_line
    assert targets.pair_target(app, operator, "pbx4").target.paired
    [event] = audit(app, "target.repin")
    assert event.success and event.actor == "olivia"
    assert event.detail["old_host_key"] == sshd.host_key_fingerprint
    assert event.detail["new_host_key"] == sshd_other_host_key.host_key_fingerprint


@pytest.mark.sshd
def test_a_given_key_the_server_does_not_present_is_not_pinned(
    app: App, operator: Actor, sshd: SshServer, sshd_other_host_key: SshServer
) -> None:
    add_ssh(app, operator, "pbx4", sshd, trust_on_first_use=True)
    plan = targets.plan_repin(
        app, operator, "pbx4", host_key=sshd_other_host_key.host_key_line
    )  # but the server still presents its old key

    with pytest.raises(HostKeyMismatch):
        targets.repin_target(app, operator, plan)

    after, _ = target_reads.show_target(app, operator, "pbx4")
    assert after.host_key == sshd.host_key_line
    [event] = audit(app, "target.repin")
    assert not event.success


@pytest.mark.sshd
def test_a_re_pin_is_refused_when_someone_re_pinned_meanwhile(
    app: App, operator: Actor, sshd: SshServer, sshd_other_host_key: SshServer
) -> None:
    add_ssh(app, operator, "pbx4", sshd, trust_on_first_use=True)
    simulate_reinstall(app, "pbx4", sshd_other_host_key)
    plan = targets.plan_repin(app, operator, "pbx4", trust_on_first_use=True)
    targets.repin_target(app, operator, plan)

    with pytest.raises(Conflict, match=r"changed to .* meanwhile"):
        targets.repin_target(app, operator, plan)


def test_a_re_pin_needs_exactly_one_source_of_the_new_key(
    app: App, operator: Actor, sshd: SshServer
) -> None:
    add_ssh(app, operator, "pbx4", sshd, host_key=sshd.host_key_line, verify=False)

    with pytest.raises(InvalidInput) as raised:
        targets.plan_repin(app, operator, "pbx4")

    assert raised.value.field == "host_key"


# -- pause and resume -------------------------------------------------------------------


@pytest.fixture
def store(app: App, clock: FakeClock) -> RunStore:
    return RunStore(app.db, node="test", policy=policy_from(app), clock=clock)


def test_a_paused_target_records_each_due_slot_as_skipped_and_keeps_every_flag(
    app: App, admin: Actor, store: RunStore, clock: FakeClock
) -> None:
    targets.add_target(app, admin, TargetSpec("box", TargetKind.LOCAL))
    targets.add_target(app, admin, TargetSpec("other", TargetKind.LOCAL))
    jobs.add_job(app, admin, "reload", minutely("reload"), bulk=True)
    jobs.add_job(app, admin, "status", minutely("status"), bulk=True, disabled_on=["box"])

    targets.pause_target(app, admin, "box", "replacing the disk")
    clock.advance(seconds=31)
    claimed = store.claim_due(clock.now)

    assert [d.target_name for d in claimed.dispatches] == ["other", "other"]
    assert runs_of(app, "box") == [("skipped", "target paused: replacing the disk")]
    _, assignments = target_reads.show_target(app, admin, "box")
    assert {a.job.name: a.enabled for a in assignments} == {"reload": True, "status": False}


def test_resuming_continues_from_the_next_slot_without_a_catch_up_burst(
    app: App, admin: Actor, store: RunStore, clock: FakeClock
) -> None:
    targets.add_target(app, admin, TargetSpec("box", TargetKind.LOCAL))
    jobs.add_job(app, admin, "nightly", JobSpec("* * * * *", "true", catchup="latest"), bulk=True)
    targets.pause_target(app, admin, "box")
    clock.advance(minutes=30)  # the scheduler was down for part of the pause

    targets.resume_target(app, admin, "box")
    burst = store.claim_due(clock.now)
    clock.advance(minutes=1)
    later = store.claim_due(clock.now)

    assert (len(burst.dispatches), burst.missed, burst.skipped) == (0, 0, 0)
    assert [d.target_name for d in later.dispatches] == ["box"]
    [resume] = audit(app, "target.resume")
    assert resume.detail["was_paused"] is True


def test_the_pause_skip_can_fail_the_check(
    app: App, admin: Actor, store: RunStore, clock: FakeClock
) -> None:
    """Negative control: the same setup without the pause dispatches the slot."""
    targets.add_target(app, admin, TargetSpec("box", TargetKind.LOCAL))
    jobs.add_job(app, admin, "reload", minutely("reload"), bulk=True)
    clock.advance(seconds=31)

    assert [d.target_name for d in store.claim_due(clock.now).dispatches] == ["box"]
    assert runs_of(app, "box") == [("running", None)]


def test_a_queued_manual_run_on_a_paused_target_is_skipped_with_the_reason(
    app: App, admin: Actor, store: RunStore, clock: FakeClock
) -> None:
    from fleetcron.services.runs import reads as runs_svc

    targets.add_target(app, admin, TargetSpec("box", TargetKind.LOCAL))
    jobs.add_job(app, admin, "reload", JobSpec("0 3 * * *", "true"), target="box")
    targets.pause_target(app, admin, "box")
    runs_svc.request_run(app, admin, "reload", target="box")

    assert store.claim_queued(clock.now) == []
    assert runs_of(app, "box") == [("skipped", "target paused")]


def test_a_pause_reason_of_several_lines_is_refused_naming_the_field(
    app: App, admin: Actor
) -> None:
    targets.add_target(app, admin, TargetSpec("box", TargetKind.LOCAL))

    with pytest.raises(InvalidInput) as raised:
        targets.pause_target(app, admin, "box", "line one\nline two")

    assert raised.value.field == "reason"
    assert not target_reads.show_target(app, admin, "box")[0].paused


def test_pausing_and_resuming_are_audited_and_a_viewer_may_not(
    app: App, admin: Actor, viewer: Actor
) -> None:
    targets.add_target(app, admin, TargetSpec("box", TargetKind.LOCAL))

    with pytest.raises(PermissionDenied):
        targets.pause_target(app, viewer, "box")
    targets.pause_target(app, admin, "box", "patching")
    assert targets.resume_target(app, admin, "box").changed
    assert not targets.resume_target(app, admin, "box").changed

    [refused, paused] = audit(app, "target.pause")
    assert (refused.success, paused.success, paused.detail["reason"]) == (False, True, "patching")


# -- unpair and pair keep per-job pauses ------------------------------------------------


def test_re_pairing_after_an_unpair_keeps_the_jobs_disabled_there_disabled(
    app: App, admin: Actor
) -> None:
    targets.add_target(app, admin, TargetSpec("pbx3", TargetKind.LOCAL))
    jobs.add_job(app, admin, "reload", minutely("reload"), bulk=True)
    jobs.add_job(app, admin, "status", minutely("status"), bulk=True, disabled_on=["pbx3"])
    jobs.add_job(app, admin, "mine", minutely("mine"), target="pbx3")
    jobs.set_enabled(app, admin, "mine", False, target="pbx3")

    targets.unpair_target(app, admin, "pbx3")
    result = targets.pair_target(app, admin, "pbx3")

    assert set(result.extended_jobs) == {"reload", "status", "mine"}
    assert result.kept_disabled == ("mine", "status")
    _, assignments = target_reads.show_target(app, admin, "pbx3")
    assert {a.job.name: a.enabled for a in assignments} == {
        "reload": True,
        "status": False,
        "mine": False,
    }


# -- removal ----------------------------------------------------------------------------


def test_removing_a_target_with_individual_jobs_is_refused_naming_them(
    app: App, admin: Actor
) -> None:
    targets.add_target(app, admin, TargetSpec("pbx4", TargetKind.LOCAL))
    jobs.add_job(app, admin, "backup", minutely("backup"), target="pbx4")
    jobs.add_job(app, admin, "trunk-check", minutely("trunk-check"), target="pbx4")

    with pytest.raises(Conflict, match="2 individual job\\(s\\): backup, trunk-check") as raised:
        targets.remove_target(app, admin, "pbx4")

    assert raised.value.field == "with_jobs"
    assert target_reads.individual_jobs(app, admin, "pbx4") == ["backup", "trunk-check"]


def test_a_target_is_removed_with_its_individual_jobs_each_audited_and_history_kept(
    app: App, admin: Actor, store: RunStore, clock: FakeClock
) -> None:
    targets.add_target(app, admin, TargetSpec("pbx4", TargetKind.LOCAL))
    targets.add_target(app, admin, TargetSpec("pbx5", TargetKind.LOCAL))
    jobs.add_job(app, admin, "backup", minutely("backup"), target="pbx4")
    jobs.add_job(app, admin, "reload", minutely("reload"), bulk=True)
    clock.advance(seconds=31)
    store.claim_due(clock.now)

    result = targets.remove_target(app, admin, "pbx4", with_jobs=True)

    assert result.removed_jobs == ("backup",)
    with app.db.read() as session:
        assert session.scalars(select(Job.name).order_by(Job.name)).all() == ["reload"]
        assert session.scalars(select(Target.name)).all() == ["pbx5"]
    assert len(runs_of(app, "pbx4")) == 2  # backup and reload ran there; history stays
    [removed_job] = audit(app, "job.remove")
    assert removed_job.job_name == "backup" and removed_job.detail["with_target"] is True
    [removed] = audit(app, "target.remove")
    assert removed.detail["removed_jobs"] == ["backup"]


# -- same host --------------------------------------------------------------------------


def test_a_second_target_on_the_same_user_host_and_port_is_refused_naming_the_first(
    app: App, operator: Actor, sshd: SshServer
) -> None:
    def add(name: str, host: str) -> None:
        targets.add_target(
            app,
            operator,
            TargetSpec(
                name,
                host=host,
                port=2222,
                user="root",
                private_key=sshd.client_private_key.encode(),
            ),
            verify=False,
        )

    add("pbx1", "pbx1.example.net")
    with pytest.raises(
        Conflict, match=r"target pbx1 already uses root@PBX1\.example\.net:2222"
    ) as raised:
        add("pbx5", "PBX1.example.net")  # host names are not case-sensitive

    assert raised.value.field == "host"
    with app.db.read() as session:
        assert session.scalars(select(Target.name)).all() == ["pbx1"]


def test_the_same_host_is_accepted_when_declared_and_another_port_is_not_the_same(
    app: App, operator: Actor, sshd: SshServer
) -> None:
    add_ssh(app, operator, "pbx1", sshd, host_key=sshd.host_key_line, verify=False)

    add_ssh(app, operator, "pbx5", sshd, verify=False, allow_same_host=True)
    targets.add_target(
        app,
        operator,
        TargetSpec(
            "pbx6",
            host=sshd.host,
            port=sshd.port + 1,
            user=sshd.user,
            private_key=sshd.client_private_key.encode(),
        ),
        verify=False,
    )
    with pytest.raises(Conflict, match="already uses"):
        targets.edit_target(app, operator, "pbx6", TargetChanges(port=sshd.port))


def test_a_missing_host_key_is_refused_before_the_target_is_created(
    app: App, operator: Actor, sshd: SshServer
) -> None:
    with pytest.raises(InvalidInput, match="no pinned host key"):
        add_ssh(app, operator, "pbx1", sshd)

    with app.db.read() as session:
        assert session.scalars(select(Target.name)).all() == []


# -- local targets: the trust boundary ---------------------------------------------------


@pytest.fixture
def locked(database_url: str, tmp_path: Path, clock: FakeClock) -> Iterator[App]:
    """The same database opened with the default: local targets disabled."""
    the_app = App.open(
        make_settings(tmp_path / "locked", database_url, allow_local_targets=False), clock=clock
    )
    yield the_app
    the_app.close()


def test_local_targets_are_disabled_by_default() -> None:
    from fleetcron.config import Settings

    assert Settings.model_fields["allow_local_targets"].default is False


def test_with_local_targets_disabled_adding_one_is_refused_even_for_an_admin(
    locked: App, admin: Actor
) -> None:
    with pytest.raises(InvalidInput, match="local targets are disabled") as raised:
        targets.add_target(locked, admin, TargetSpec("here", TargetKind.LOCAL))

    assert (raised.value.field, raised.value.value) == ("kind", "local")
    with locked.db.read() as session:
        assert session.scalars(select(Target.name)).all() == []


def test_an_operator_may_not_add_a_local_target(app: App, operator: Actor) -> None:
    with pytest.raises(PermissionDenied, match="only an admin may add one"):
        targets.add_target(app, operator, TargetSpec("here", TargetKind.LOCAL))

    [event] = audit(app, "target.add")
    assert not event.success


@pytest.mark.sshd
def test_an_operator_may_not_turn_a_target_into_a_local_one(
    app: App, operator: Actor, admin: Actor, sshd: SshServer
) -> None:
    add_ssh(app, operator, "pbx1", sshd, host_key=sshd.host_key_line, verify=False)

    with pytest.raises(PermissionDenied):
        targets.edit_target(app, operator, "pbx1", TargetChanges(kind=TargetKind.LOCAL))
    result = targets.edit_target(app, admin, "pbx1", TargetChanges(kind=TargetKind.LOCAL))

    assert (result.target.kind, result.target.host, result.target.host_key) == ("local", None, None)


def test_with_local_targets_disabled_their_slots_are_skipped_with_the_reason(
    app: App, admin: Actor, locked: App, clock: FakeClock
) -> None:
    targets.add_target(app, admin, TargetSpec("here", TargetKind.LOCAL))
    jobs.add_job(app, admin, "reload", minutely("reload"), bulk=True)
    clock.advance(seconds=31)

    claimed = RunStore(locked.db, node="test", policy=policy_from(locked), clock=clock).claim_due(
        clock.now
    )

    assert claimed.dispatches == []
    assert runs_of(app, "here") == [("skipped", "local targets are disabled")]
    with pytest.raises(InvalidInput, match="local targets are disabled"):
        targets.pair_target(locked, admin, "here")
