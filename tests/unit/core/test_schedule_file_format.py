"""The schedule file, pure: parsing with line numbers, plans, duplicate registrations, rendering."""

from __future__ import annotations

import dataclasses
from textwrap import dedent

import pytest

from fleetcron.core.schedule_file import (
    Defaults,
    JobState,
    Registration,
    Rendered,
    ScheduleFileError,
    duplicates_to_allow,
    find_duplicates,
    parse_schedule_file,
    plan_changes,
    render_schedule_file,
)

EXAMPLE = dedent(
    """\
    version: 1
    jobs:
      - name: reload
        bulk: true
        selector: env=prod,role=pbx
        disabled_on: [pbx7]
        schedule: "0 2 * * *"
        timezone: Europe/Berlin
        command: /usr/sbin/fwconsole reload
        notes: nightly reload
      - name: backup-acme
        target: acme-app1
        schedule: "30 3 * * 0"
        command: php artisan backup:run
        timeout: 3600
        retry_on: [failed, timed_out]
        allow_duplicate: true
    """
)

DEFAULTS = Defaults(
    notes="",
    overlap="allow",
    catchup="none",
    jitter=0,
    retries=0,
    retry_on=("connect_error",),
    retry_backoff=30,
)

RELOAD = JobState(
    name="reload",
    bulk=True,
    target=None,
    selector="env=prod",
    disabled_on=("pbx7",),
    enabled=None,
    schedule="0 2 * * *",
    timezone="Europe/Berlin",
    command="/usr/sbin/fwconsole reload",
    notes="nightly reload",
    timeout=300,
    overlap="allow",
    catchup="none",
    jitter=0,
    retries=0,
    retry_on=("connect_error",),
    retry_backoff=30,
)
BACKUP = dataclasses.replace(
    RELOAD,
    name="backup",
    bulk=False,
    target="acme-app1",
    selector="",
    disabled_on=(),
    enabled=True,
    command="php artisan backup:run",
)


def problems(text: str) -> list[str]:
    with pytest.raises(ScheduleFileError) as caught:
        parse_schedule_file(dedent(text), source="schedule.yaml")
    return [p.render("schedule.yaml") for p in caught.value.problems]


def job_file(*job_lines: str) -> str:
    """A version 1 file with one job whose keys are ``job_lines`` (job starts on line 3)."""
    body = "\n".join(f"    {line}" for line in job_lines)
    return f"version: 1\njobs:\n  - {body.lstrip()}\n"


# --- parsing ---------------------------------------------------------------------------


def test_it_reads_a_bulk_and_an_individual_job() -> None:
    parsed = parse_schedule_file(EXAMPLE)

    reload, backup = parsed.jobs
    assert (reload.name, reload.bulk, reload.selector, reload.disabled_on) == (
        "reload",
        True,
        "env=prod,role=pbx",
        ("pbx7",),
    )
    assert reload.spec == {
        "schedule": "0 2 * * *",
        "timezone": "Europe/Berlin",
        "command": "/usr/sbin/fwconsole reload",
        "notes": "nightly reload",
    }
    assert (backup.bulk, backup.target, backup.allow_duplicate) == (False, "acme-app1", True)
    assert backup.spec["timeout_s"] == 3600
    assert backup.spec["retry_on"] == ("failed", "timed_out")


def test_it_keeps_the_line_of_each_field() -> None:
    backup = parse_schedule_file(EXAMPLE).jobs[1]

    assert (backup.line, backup.lines["schedule"], backup.lines["timeout"]) == (11, 13, 15)
    problem = backup.problem("schedule", "minute: 60 is out of range 0-59")
    assert problem.render("schedule.yaml") == (
        "schedule.yaml:13: jobs[1].schedule: minute: 60 is out of range 0-59"
    )


def test_an_unknown_key_is_an_error_listing_the_allowed_keys() -> None:
    missing, unknown = problems(
        job_file("name: a", "target: t", "schedul: '* * * * *'", "command: x")
    )

    assert unknown.startswith("schedule.yaml:5: jobs[0].schedul: unknown key; allowed keys: name,")
    assert "retry_backoff" in unknown
    assert missing == "schedule.yaml:3: jobs[0]: missing required key schedule"


def test_a_wrong_type_is_an_error_naming_what_was_expected() -> None:
    found = problems(
        job_file(
            "name: a",
            "target: t",
            "schedule: '0 2 * * *'",
            "command: x",
            "timeout: an hour",
            "bulk: maybe",
        )
    )

    assert found == [
        "schedule.yaml:7: jobs[0].timeout: expected an integer, got a string 'an hour'",
        "schedule.yaml:8: jobs[0].bulk: expected a boolean, got a string 'maybe'",
    ]


def test_a_number_where_a_string_belongs_must_be_quoted() -> None:
    (message,) = problems(job_file("name: a", "target: 2024", "schedule: '@daily'", "command: x"))

    assert message == (
        "schedule.yaml:4: jobs[0].target: expected a string, got an integer '2024'; quote it"
    )


def test_every_problem_of_a_file_is_reported_in_line_order() -> None:
    found = problems(
        """\
        version: 1
        jobs:
          - name: a
            target: t
            command: x
          - name: Bad Name
            bulk: true
            target: t
            schedule: "@daily"
            command: x
        """
    )

    assert found == [
        "schedule.yaml:3: jobs[0]: missing required key schedule",
        "schedule.yaml:6: jobs[1].name: 'Bad Name' is not a valid name; allowed: lowercase "
        "letters, digits, '.', '_' and '-', starting with a letter or digit, at most 64",
        "schedule.yaml:8: jobs[1].target: a bulk job runs on the targets its selector "
        "matches; remove target",
    ]


def test_the_error_message_lists_all_problems_under_the_file_name() -> None:
    with pytest.raises(ScheduleFileError) as caught:
        parse_schedule_file("version: 1\njobs: 3\nextra: 1\n", source="fleet.yaml")

    assert str(caught.value).splitlines() == [
        "2 problems in fleet.yaml:",
        "  fleet.yaml:2: jobs: expected a list of jobs, got an integer '3'",
        "  fleet.yaml:3: extra: unknown key; allowed keys: version, calendars, jobs, blackouts",
    ]


def test_a_job_needs_a_target_or_bulk() -> None:
    (message,) = problems(job_file("name: a", "schedule: '@daily'", "command: x"))

    assert message == (
        "schedule.yaml:3: jobs[0]: a job needs either target: NAME (individual) or bulk: true"
    )


def test_selector_and_disabled_on_belong_to_bulk_jobs_only() -> None:
    found = problems(
        job_file(
            "name: a",
            "target: t",
            "selector: env=prod",
            "disabled_on: [t]",
            "schedule: '@daily'",
            "command: x",
        )
    )

    assert found == [
        "schedule.yaml:5: jobs[0].selector: applies to bulk jobs only (bulk: true)",
        "schedule.yaml:6: jobs[0].disabled_on: applies to bulk jobs only (bulk: true)",
    ]


def test_a_bulk_job_pauses_per_target_not_with_enabled() -> None:
    (message,) = problems(
        job_file("name: a", "bulk: true", "enabled: false", "schedule: '@daily'", "command: x")
    )

    assert "jobs[0].enabled: a bulk job is paused per target with disabled_on" in message


def test_a_job_declared_twice_is_an_error_at_the_second() -> None:
    found = problems(
        """\
        version: 1
        jobs:
          - {name: a, target: t, schedule: "@daily", command: x}
          - {name: a, target: u, schedule: "@daily", command: y}
        """
    )

    assert found == ["schedule.yaml:4: jobs[1].name: job a is declared twice (first on line 3)"]


def test_a_key_given_twice_is_an_error() -> None:
    (message,) = problems(
        job_file("name: a", "target: t", "schedule: '@daily'", "command: x", "command: y")
    )

    assert message == "schedule.yaml:7: jobs[0].command: given twice (first on line 6)"


def test_the_version_is_required_and_must_be_1() -> None:
    assert problems("jobs: []\n") == [
        "schedule.yaml:1: version: missing; this fleetcron reads version: 1"
    ]
    assert problems("version: 2\njobs: []\n") == [
        "schedule.yaml:1: version: 2 is not supported; this fleetcron reads version 1"
    ]


def test_broken_yaml_is_reported_at_its_line() -> None:
    (message,) = problems(job_file("name: a", "target: t", "schedule: * * * * *", "command: x"))

    # An unquoted leading * is a YAML alias, hence the advice to quote cron expressions.
    assert message.startswith("schedule.yaml:5: not valid YAML:")


def test_an_empty_file_says_how_a_schedule_file_starts() -> None:
    assert problems("") == [
        "schedule.yaml:1: the file is empty; a schedule file starts with version: 1"
    ]


def test_a_file_without_jobs_declares_none() -> None:
    assert parse_schedule_file("version: 1\njobs:\n").jobs == ()
    assert parse_schedule_file("version: 1\n").jobs == ()


# --- plans -----------------------------------------------------------------------------


def test_a_job_not_in_the_store_is_created() -> None:
    plan = plan_changes([RELOAD], [], prune=False)

    assert [(c.kind, c.name) for c in plan.changes] == [("create", "reload")]


def test_a_job_equal_to_the_store_is_no_change() -> None:
    plan = plan_changes([RELOAD, BACKUP], [BACKUP, RELOAD], prune=True)

    assert plan.empty


def test_a_change_lists_each_changed_field_old_and_new() -> None:
    wanted = dataclasses.replace(RELOAD, schedule="0 3 * * *", disabled_on=())

    (change,) = plan_changes([wanted], [RELOAD], prune=False).changes

    assert change.kind == "change"
    assert [(f.field, f.old, f.new) for f in change.fields] == [
        ("disabled_on", ("pbx7",), ()),
        ("schedule", "0 2 * * *", "0 3 * * *"),
    ]


def test_the_enabled_flag_of_a_job_waiting_for_its_target_is_not_compared() -> None:
    waiting = dataclasses.replace(BACKUP, enabled=None)

    assert plan_changes([BACKUP], [waiting], prune=False).empty


def test_jobs_missing_from_the_file_are_kept_unless_pruned() -> None:
    kept = plan_changes([RELOAD], [RELOAD, BACKUP], prune=False)
    pruned = plan_changes([RELOAD], [RELOAD, BACKUP], prune=True)

    assert (kept.changes, kept.kept) == ((), ("backup",))
    assert [(c.kind, c.name) for c in pruned.changes] == [("delete", "backup")]
    assert pruned.kept == ()


# --- duplicate registrations -------------------------------------------------------------


def test_the_same_command_on_the_same_target_twice_is_a_duplicate() -> None:
    found = find_duplicates(
        [
            Registration("reload", "/usr/sbin/fwconsole reload", frozenset({"pbx1", "pbx2"})),
            Registration("reload-again", "  /usr/sbin/fwconsole reload\n", frozenset({"pbx2"})),
        ]
    )

    assert [(d.jobs, d.targets) for d in found] == [(("reload", "reload-again"), ("pbx2",))]
    assert found[0].describe() == (
        "jobs reload and reload-again both run '/usr/sbin/fwconsole reload' on target pbx2; "
        "remove one, or set allow_duplicate: true on one of them"
    )


def test_a_duplicate_allowed_on_one_of_the_two_jobs_is_not_reported() -> None:
    found = find_duplicates(
        [
            Registration("a", "backup.sh", frozenset({"t"})),
            Registration("b", "backup.sh", frozenset({"t"}), allow_duplicate=True),
        ]
    )

    assert found == []


def test_the_same_command_on_different_targets_is_no_duplicate() -> None:
    found = find_duplicates(
        [
            Registration("a", "backup.sh", frozenset({"t1"})),
            Registration("b", "backup.sh", frozenset({"t2"})),
            Registration("c", "backup.sh --full", frozenset({"t1"})),
        ]
    )

    assert found == []


def test_only_pairs_involving_the_given_jobs_are_reported() -> None:
    registrations = [
        Registration("old1", "x", frozenset({"t"})),
        Registration("old2", "x", frozenset({"t"})),
        Registration("new", "y", frozenset({"t"})),
    ]

    assert find_duplicates(registrations, among={"new"}) == []
    assert len(find_duplicates(registrations)) == 1


def test_one_allowing_job_per_pair_covers_every_pair_of_three() -> None:
    found = find_duplicates(Registration(name, "x", frozenset({"t"})) for name in "abc")

    marked = duplicates_to_allow(found)

    assert len(found) == 3
    assert all(set(d.jobs) & set(marked) for d in found)
    assert "a" not in marked


# --- rendering -------------------------------------------------------------------------


def _as_read_back(state: JobState) -> JobState:
    decl = parse_schedule_file(render_schedule_file([Rendered(state)], DEFAULTS)).jobs[0]
    spec = {**dataclasses.asdict(DEFAULTS), **decl.spec}
    return dataclasses.replace(
        state,
        bulk=decl.bulk,
        target=decl.target,
        selector=decl.selector,
        disabled_on=decl.disabled_on,
        schedule=spec["schedule"],
        timezone=spec["timezone"],
        command=spec["command"],
        notes=spec["notes"],
        timeout=spec["timeout_s"],
        retry_on=tuple(spec["retry_on"]),
    )


@pytest.mark.parametrize(
    "state",
    [
        RELOAD,
        dataclasses.replace(BACKUP, schedule="*/5 * * * *", command="set -e\ncd /srv\n./run"),
        dataclasses.replace(BACKUP, name="no", target="on", command="  spaced  ", notes="42"),
        dataclasses.replace(BACKUP, retry_on=()),
    ],
    ids=["bulk", "multi-line-command", "yaml-words", "no-retries"],
)
def test_a_rendered_job_reads_back_the_same(state: JobState) -> None:
    assert _as_read_back(state) == state


def test_a_rendered_file_writes_defaults_only_where_they_vary_by_installation() -> None:
    text = render_schedule_file(
        [Rendered(BACKUP, allow_duplicate=True, comments=("why",))], DEFAULTS
    )

    assert text == dedent(
        """\
        version: 1
        jobs:
          # why
          - name: backup
            target: acme-app1
            schedule: "0 2 * * *"
            timezone: Europe/Berlin
            command: php artisan backup:run
            notes: nightly reload
            timeout: 300
            allow_duplicate: true
        """
    )


def test_every_public_name_is_exported() -> None:
    import fleetcron.core.schedule_file as module

    assert all(hasattr(module, name) for name in module.__all__)
