"""Adversary: no sequence of an operator's actions puts an operator's command on a local
target that runs with the scheduler's privileges.

The actions come from the permission table (:data:`fleetcron.core.permissions.MATRIX`):
every action an operator may perform either has steps here that exercise it through the
real routes (HTTP on the real app, SQLite), or is named in :data:`INERT` with the reason it
cannot create an assignment or change what runs on one. A new action in the table fails
:func:`test_every_operator_action_is_exercised` until it is placed in one or the other.

Each sequence starts from the same state (one SQLite file): an admin's local
target ``here`` (``role=sched``) with ``local_run_as`` unset, an admin's job on it, an
admin's job elsewhere, and an operator's bulk job that selects nothing (with two
versions, so a revert brings its first selector back). Every command the operator writes
contains :data:`MARK`; the check reads the store, not the gate's author stamps: no
assignment on a local target whose job's command holds the mark, and no run there of
such a command.

All pairs of steps run, and a fixed sample of triples (:data:`TRIPLES`): a whole
triple set would take minutes, and every triple also checks its own prefixes. The
sequences are played as a tree of their common prefixes: a prefix's state is kept (SQLite's
online backup, in memory) and put back into the app's database before each of its
extensions after the first, so a step shared by many sequences is sent once rather than
once per sequence. The negative control plants the old unchecked extension (a gate that
admits everything) and sees the search find a violating sequence.
"""

from __future__ import annotations

import itertools
import random
import shutil
import sqlite3
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from fixtures.app import FakeClock, make_settings
from fleetcron.app import Actor, App
from fleetcron.core.permissions import MATRIX, allowed
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.errors import FleetcronError, PermissionDenied
from fleetcron.services.fleet import assignments as fleet
from fleetcron.services.schedule_file import apply_schedule
from fleetcron.services.targets import edit as targets
from fleetcron.store.schema import Assignment, Job, Run, Target
from integration.web.conftest import API, bearer, new_client, token_for

#: In every command the operator writes.
MARK = "OPER-WROTE"
OPERATOR = Actor("olivia", "operator")

#: Operator actions that cannot create an assignment or change what one runs, and why.
INERT: dict[str, str] = {
    "target.remove": "removes a target and its assignments",
    "target.repin": "re-pins an SSH host key; a local target has none",
    "job.remove": "removes a job and its assignments",
    "run.stop": "stops a run already started",
    "token.manage_own": "the operator's own tokens act with the operator's role",
    "account.manage_own": "the operator's own password",
    "incident.ack": "stops an incident's reminders; changes no job, target or assignment",
    "silence.add": "mutes messages about jobs or targets; runs are recorded as before",
    "silence.expire": "ends a silence of messages; changes no job, target or assignment",
    "blackout.add": "holds back slots of existing assignments; creates none, changes no command",
    "blackout.change": "moves a window's times or scope; creates no assignment",
    "blackout.lift": "ends a window early; deferred runs start through the same local gate",
    "calendar.add": "adds or imports dates; a job's calendars only take fire times away",
    "calendar.remove": "removes a calendar no job names; creates no assignment",
}


@dataclass(frozen=True)
class Step:
    """One request of the operator: ``action`` is the permission-table entry it exercises."""

    action: str
    label: str
    send: Callable[[TestClient, App, dict[str, str]], int]

    def __repr__(self) -> str:
        return self.label


def _post(path: str, body: object) -> Callable[[TestClient, App, dict[str, str]], int]:
    return lambda http, _app, auth: http.post(f"{API}{path}", json=body, headers=auth).status_code


def _patch(path: str, body: object) -> Callable[[TestClient, App, dict[str, str]], int]:
    return lambda http, _app, auth: http.patch(f"{API}{path}", json=body, headers=auth).status_code


def _apply(text: str) -> Callable[[TestClient, App, dict[str, str]], int]:
    """A schedule file applied as the operator (``fleetcron apply``; it asks job.add/edit)."""

    def send(_http: TestClient, app: App, _auth: dict[str, str]) -> int:
        try:
            apply_schedule(app, OPERATOR, text)
        except PermissionDenied:
            return 403
        except FleetcronError:
            return 400
        return 200

    return send


def _job(name: str, selector: str, command: str) -> dict[str, object]:
    return {
        "name": name,
        "bulk": True,
        "selector": selector,
        "schedule": "0 0 1 1 *",
        "command": command,
    }


def _schedule_file(name: str, selector: str, command: str) -> str:
    return (
        "version: 1\njobs:\n"
        f"  - name: {name}\n    bulk: true\n    selector: {selector}\n"
        f'    schedule: "0 0 1 1 *"\n    command: {command}\n'
    )


STEPS: tuple[Step, ...] = (
    Step("job.add", "add bulk esc=1", _post("/jobs", _job("op-new", "esc=1", f"echo {MARK} 1"))),
    Step(
        "job.add",
        "add bulk role=sched",
        _post("/jobs", _job("op-sched", "role=sched", f"echo {MARK} 2")),
    ),
    Step(
        "job.add",
        "add individual on here",
        _post(
            "/jobs",
            {"name": "op-ind", "target": "here", "schedule": "0 0 1 1 *", "command": f"{MARK}"},
        ),
    ),
    Step("job.edit", "edit adm command", _patch("/jobs/adm", {"command": f"echo {MARK} 3"})),
    Step("job.edit", "edit far command", _patch("/jobs/far", {"command": f"echo {MARK} 4"})),
    Step("job.edit", "edit op selector role=sched", _patch("/jobs/op", {"selector": "role=sched"})),
    Step("job.edit", "edit op selector esc=1", _patch("/jobs/op", {"selector": "esc=1"})),
    Step("job.edit", "edit far selector esc=1", _patch("/jobs/far", {"selector": "esc=1"})),
    Step("job.revert", "revert op to 1", _post("/jobs/op/revert", {"to": 1})),
    Step("job.revert", "revert far to 1", _post("/jobs/far/revert", {"to": 1})),
    Step(
        "target.label", "label here esc=1", _post("/targets/here/labels", {"labels": {"esc": "1"}})
    ),
    Step(
        "target.edit",
        "edit here labels esc=2",
        _patch("/targets/here", {"labels": {"role": "sched", "esc": "2"}}),
    ),
    Step(
        "target.edit",
        "edit here labels far=1",
        _patch("/targets/here", {"labels": {"role": "sched", "far": "1"}}),
    ),
    Step("target.unpair", "unpair here", _post("/targets/here/unpair", {})),
    Step("target.pair", "pair here", _post("/targets/here/pair", {})),
    Step("target.pause", "pause here", _post("/targets/here/pause", {})),
    Step("target.pause", "resume here", _post("/targets/here/resume", {})),
    Step(
        "target.add",
        "add local here2",
        _post("/targets", {"name": "here2", "kind": "local", "labels": {"esc": "1"}}),
    ),
    Step("job.disable", "disable op", _post("/jobs/op/disable", {})),
    Step("job.enable", "enable op", _post("/jobs/op/enable", {})),
    Step("job.run", "run op on here", _post("/jobs/op/run", {"target": "here"})),
    Step("job.run", "run far on here", _post("/jobs/far/run", {"target": "here"})),
    Step(
        "job.add",
        "apply file esc=1",
        _apply(_schedule_file("op-file", "esc=1", f"echo {MARK} 5")),
    ),
    Step(
        "job.edit",
        "apply file changing adm",
        _apply(_schedule_file("adm", "role=sched", f"echo {MARK} 6")),
    ),
)

#: The sampled triples: enough to mix every step into several orders, bounded in time.
TRIPLES = 300


def operator_actions() -> set[str]:
    """What the permission table lets an operator change (reads change nothing)."""
    return {a for a in MATRIX if allowed("operator", a) and not a.endswith(".read")}


def sequences(steps: Sequence[Step], triples: int) -> list[tuple[Step, ...]]:
    """Every pair and the sampled triples."""
    pairs = list(itertools.product(steps, repeat=2))
    return [*pairs, *random.Random(33).sample(list(itertools.product(steps, repeat=3)), triples)]


#: The sequences as a tree of their common prefixes: each step leads to its extensions.
Tree = dict[Step, "Tree"]


def prefix_tree(played: Sequence[tuple[Step, ...]]) -> Tree:
    """``played`` as a tree: a sequence is the path from the root to one of its nodes."""
    root: Tree = {}
    for sequence in played:
        node = root
        for step in sequence:
            node = node.setdefault(step, {})
    return root


@dataclass
class World:
    """The starting state, as one SQLite file to copy, and the operator's token in it."""

    template: Path
    data_dir: Path
    token: str
    clock: FakeClock


@pytest.fixture
def world(sqlite_template: Path, tmp_path: Path, clock: FakeClock) -> World:
    path = tmp_path / "world.db"
    shutil.copyfile(sqlite_template, path)
    app = App.open(
        make_settings(tmp_path / "data", f"sqlite:///{path}", local_job_role="admin"), clock=clock
    )
    admin = Actor("admin", "admin")
    targets.add_target(app, admin, TargetSpec("here", TargetKind.LOCAL))
    targets.label_target(app, admin, "here", ["role=sched"])
    token = token_for(app, "operator")
    with new_client(app) as http:
        as_admin = bearer(token_for(app, "admin"))
        for job in (_job("adm", "role=sched", "uptime"), _job("far", "esc=9", "date")):
            assert http.post(f"{API}/jobs", json=job, headers=as_admin).status_code == 201
        oper = bearer(token)
        created = http.post(f"{API}/jobs", json=_job("op", "esc=1", f"echo {MARK}"), headers=oper)
        assert created.status_code == 201, created.text
        moved = http.patch(f"{API}/jobs/op", json={"selector": "esc=2"}, headers=oper)
        assert moved.status_code == 200, moved.text
    app.close()
    return World(path, tmp_path / "data", token, clock)


def violations(app: App) -> list[str]:
    """Operator-written commands assigned to, or run on, a local target (two statements,
    checked after every step: the store is read, not the gate's author stamps)."""
    with app.db.read() as session:
        assigned = session.execute(
            select(Job.name, Target.name, Job.command)
            .join(Assignment, Assignment.job_id == Job.id)
            .join(Target, Target.id == Assignment.target_id)
            .where(Target.kind == "local")
        )
        found = [
            f"assignment {job} on {target}: {command}"
            for job, target, command in assigned
            if MARK in command
        ]
        runs = session.execute(
            select(Run.id, Run.job_name, Run.target_name, Run.command)
            .join(Target, Target.id == Run.target_id)
            .where(Target.kind == "local")
        )
        found += [f"run {r.id} of {r.job_name} on {r.target_name}: {r.command}" for r in runs]
    return [f for f in found if MARK in f]


@dataclass
class Saved:
    """A state of the app's database (an in-memory copy) and the jobs it has."""

    copy: sqlite3.Connection
    jobs: list[str]


def job_names(app: App) -> list[str]:
    with app.db.read() as session:
        return sorted(session.scalars(select(Job.name)))


def live_path(app: App) -> str:
    url = app.settings.database_url
    assert url is not None and url.startswith("sqlite:///")
    return url.removeprefix("sqlite:///")


def save(path: str | Path, jobs: list[str]) -> Saved:
    """The database file at ``path`` as it is now, which has ``jobs``."""
    copy = sqlite3.connect(":memory:")
    with closing(sqlite3.connect(path)) as live:
        live.backup(copy)
    return Saved(copy, jobs)


def restore(saved: Saved, app: App) -> None:
    """Put a saved state back into the app's database file (SQLite's online backup,
    which the app's pooled connections see as any other writer's change)."""
    with closing(sqlite3.connect(live_path(app))) as live:
        saved.copy.backup(live)
    assert job_names(app) == saved.jobs, "not restored"


@dataclass
class Player:
    """Plays sequences of steps on one app as the world's operator."""

    app: App
    http: TestClient
    world: World

    def step(self, sequence: tuple[Step, ...]) -> list[str]:
        """Send the last step of ``sequence`` (its prefix already played); the violations."""
        status = sequence[-1].send(self.http, self.app, bearer(self.world.token))
        assert status < 500, f"{list(sequence)}: {sequence[-1].label} answered {status}"
        return [f"after {list(sequence)}: {v}" for v in violations(self.app)]

    def walk(self, tree: Tree, prefix: tuple[Step, ...], saved: Saved | None) -> list[str]:
        """Play each extension of ``prefix`` from its state (the app's database on arrival,
        ``saved`` for the second one on); the violations of the first sequence that has
        any."""
        for i, (step, extensions) in enumerate(tree.items()):
            if i:
                assert saved is not None, f"{list(prefix)}: a second extension, no saved state"
                restore(saved, self.app)
            found = self.step((*prefix, step))
            if found:
                return found
            if extensions:
                found = self.extend(extensions, (*prefix, step))
                if found:
                    return found
        return []

    def extend(self, tree: Tree, prefix: tuple[Step, ...]) -> list[str]:
        """:meth:`walk` from the state ``prefix`` left, saved first if it has more than one
        extension."""
        if len(tree) == 1:
            return self.walk(tree, prefix, None)
        saved = save(live_path(self.app), job_names(self.app))
        with closing(saved.copy):
            return self.walk(tree, prefix, saved)


def search(world: World, where: Path, triples: int) -> list[str]:
    """Play every sequence on one app; the violations of the first sequence that has any."""
    path = where / "db.sqlite"
    where.mkdir()
    shutil.copyfile(world.template, path)
    app = App.open(
        make_settings(world.data_dir, f"sqlite:///{path}", local_job_role="admin"),
        clock=world.clock,
    )
    try:
        start = save(world.template, ["adm", "far", "op"])
        with new_client(app) as http, closing(start.copy):
            restore(start, app)
            tree = prefix_tree(sequences(STEPS, triples))
            return Player(app, http, world).walk(tree, (), start)
    finally:
        app.close()


def test_every_operator_action_is_exercised() -> None:
    exercised = {step.action for step in STEPS}
    assert exercised <= operator_actions(), exercised - operator_actions()
    assert set(INERT) <= operator_actions(), set(INERT) - operator_actions()
    missing = operator_actions() - exercised - set(INERT)
    assert not missing, f"operator actions with no step and no reason in INERT: {missing}"


def test_no_sequence_puts_an_operators_command_on_a_privileged_local_target(
    world: World, tmp_path: Path
) -> None:
    assert search(world, tmp_path / "runs", TRIPLES) == []


def test_the_search_finds_the_old_unchecked_extension(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fleet, "admit", lambda app, job, target: None)
    found = search(world, tmp_path / "runs", 0)
    assert found, "a gate that admits everything went unnoticed"
    assert "on here" in found[0], found
