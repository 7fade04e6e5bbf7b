"""Schedules as code: the YAML schedule file and the plan that brings the store to it (the
rule against registering one command twice on one target is :mod:`fleetcron.core.duplicates`).

Pure: the service (:mod:`fleetcron.services.schedule_file`) reads the store and the file,
this module only turns text into declarations, compares plain states and renders YAML.

Format, version 1 (docs/schedules-as-code.md)::

    version: 1
    jobs:
      - name: reload
        bulk: true
        selector: env=prod,role=pbx   # optional; empty = every paired target
        disabled_on: [pbx7]           # paused there
        schedule: "0 2 * * *"
        command: /usr/sbin/fwconsole reload
      - name: backup-acme
        target: acme-app1
        schedule: "30 3 * * 0"
        command: php artisan backup:run

Every problem names the line and the field (``schedule.yaml:7: jobs[1].schedule: ...``);
all problems of a file are reported together.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal

import yaml
from yaml.nodes import Node, ScalarNode, SequenceNode

from fleetcron.core import validation as v
from fleetcron.core.duplicates import (
    Duplicate,
    Registration,
    duplicates_to_allow,
    find_duplicates,
)
from fleetcron.core.job_options import BY_KEY, OPTIONS
from fleetcron.core.schedule_blackouts import BlackoutChange, BlackoutDecl, read_blackouts
from fleetcron.core.schedule_calendars import (
    CalendarChange,
    CalendarDecl,
    CalendarState,
    calendar_mapping,
    read_calendars,
)
from fleetcron.core.yaml_nodes import TAGS, Problem, Reader, kind_of, line_of
from fleetcron.errors import InvalidInput

FILE_VERSION = 1

TOP_KEYS = ("version", "calendars", "jobs", "blackouts")

#: The keys that say where a job runs and whether it is paused; the rest are the job's
#: options, declared in :mod:`fleetcron.core.job_options`.
PLACEMENT_KEYS = ("name", "bulk", "target", "selector", "disabled_on", "enabled")

#: Keys of one job, in the order export writes them.
JOB_KEYS = PLACEMENT_KEYS + tuple(o.key for o in OPTIONS)

#: File key -> field of :class:`fleetcron.services.jobs.edit.JobSpec`.
SPEC_FIELDS = {o.key: o.name for o in OPTIONS}

#: The YAML type of each option kind.
_KIND_OF_OPTION = {
    "text": "string",
    "choice": "string",
    "int": "integer",
    "flag": "boolean",
    "choices": "list of strings",
}

#: Keys of texts that may be counts: an integer there is taken as its text.
_COUNT_KEYS = frozenset(o.key for o in OPTIONS if o.count_as_text)

#: What each key holds, as told in type errors.
_KINDS: dict[str, str] = {
    **dict.fromkeys(("name", "target", "selector"), "string"),
    **dict.fromkeys(("bulk", "enabled"), "boolean"),
    "disabled_on": "list of strings",
    **{o.key: _KIND_OF_OPTION[o.kind] for o in OPTIONS},
}

# --- errors -------------------------------------------------------------------------------


class ScheduleFileError(InvalidInput):
    """The schedule file is not valid; nothing was applied."""

    def __init__(self, source: str, problems: Sequence[Problem]) -> None:
        ordered = sorted(problems)
        lines = [p.render(source) for p in ordered]
        if len(lines) == 1:
            message = lines[0]
        else:
            message = f"{len(lines)} problems in {source}:\n" + "\n".join(
                f"  {line}" for line in lines
            )
        super().__init__(
            message,
            field=ordered[0].path if ordered else None,
            value=None,
            allowed="see docs/schedules-as-code.md",
        )
        self.source = source
        self.problems = tuple(ordered)


# --- parsing ------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobDecl:
    """One job as the file declares it; values as given, checked for shape and type only.

    ``spec`` holds the given fields under their :class:`JobSpec` names (``timeout_s``...);
    fields left out take the product's defaults later. ``lines`` maps each given key to
    its line.
    """

    index: int
    line: int
    name: str
    bulk: bool
    target: str | None
    selector: str
    disabled_on: tuple[str, ...]
    enabled: bool
    allow_duplicate: bool
    spec: Mapping[str, Any]
    lines: Mapping[str, int]

    def path(self, key: str | None = None) -> str:
        return f"jobs[{self.index}]" + (f".{key}" if key else "")

    def problem(self, key: str, message: str) -> Problem:
        """A problem with one field of this job, at that field's line."""
        return Problem(self.lines.get(key, self.line), self.path(key), message)


@dataclass(frozen=True)
class ScheduleFile:
    source: str
    version: int
    jobs: tuple[JobDecl, ...]
    calendars: tuple[CalendarDecl, ...] = ()
    blackouts: tuple[BlackoutDecl, ...] = ()

    @property
    def names(self) -> frozenset[str]:
        return frozenset(decl.name for decl in self.jobs)


def parse_schedule_file(text: str, *, source: str = "schedule.yaml") -> ScheduleFile:
    """Read a schedule file; raises :class:`ScheduleFileError` listing every problem found.

    Checks the structure, the keys and the types, job names (valid, each once) and the
    shape of each job (a bulk job or one target, and only the keys that kind takes).
    Values (cron, zone, ranges, targets) are checked by the service against the product's
    rules and the store.
    """
    root = _compose(text, source)
    reader = Reader()
    top = reader.mapping(root, "", TOP_KEYS, "a mapping with version and jobs")
    if top is None:
        raise ScheduleFileError(source, reader.problems)
    version = _read_version(reader, root, top)
    calendars = read_calendars(reader, top["calendars"][1]) if "calendars" in top else []
    jobs = _read_jobs(reader, top["jobs"][1]) if "jobs" in top else []
    blackouts = read_blackouts(reader, top["blackouts"][1]) if "blackouts" in top else []
    if reader.problems:
        raise ScheduleFileError(source, reader.problems)
    assert version is not None
    return ScheduleFile(
        source=source,
        version=version,
        jobs=tuple(jobs),
        calendars=tuple(calendars),
        blackouts=tuple(blackouts),
    )


def _compose(text: str, source: str) -> Node:
    """The file's YAML node tree; an empty file or invalid YAML is the file's one problem."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = int(mark.line) + 1 if mark is not None else 1
        raise ScheduleFileError(
            source, [Problem(line, "", f"not valid YAML: {exc.problem or exc.context}")]
        ) from None
    except yaml.YAMLError as exc:
        raise ScheduleFileError(source, [Problem(1, "", f"not valid YAML: {exc}")]) from None
    if root is None:
        raise ScheduleFileError(
            source,
            [
                Problem(
                    1, "", f"the file is empty; a schedule file starts with version: {FILE_VERSION}"
                )
            ],
        )
    return root


def _read_jobs(reader: Reader, jobs_node: Node) -> list[JobDecl]:
    """The jobs that read without a problem, each name once (a second declaration of a
    name is a problem naming the first one's line); an empty ``jobs:`` is no jobs."""
    jobs: list[JobDecl] = []
    if isinstance(jobs_node, SequenceNode):
        first_line: dict[str, int] = {}
        for index, item in enumerate(jobs_node.value):
            decl = _read_job(reader, item, index)
            if decl is None:
                continue
            if decl.name in first_line:
                reader.problems.append(
                    decl.problem(
                        "name",
                        f"job {decl.name} is declared twice "
                        f"(first on line {first_line[decl.name]})",
                    )
                )
                continue
            first_line[decl.name] = decl.lines["name"]
            jobs.append(decl)
    elif not (isinstance(jobs_node, ScalarNode) and jobs_node.tag.endswith(":null")):
        reader.fail(jobs_node, "jobs", f"expected a list of jobs, got {kind_of(jobs_node)}")
    return jobs


def _read_version(reader: Reader, root: Node, top: dict[str, tuple[Node, Node]]) -> int | None:
    if "version" not in top:
        reader.fail(root, "version", f"missing; this fleetcron reads version: {FILE_VERSION}")
        return None
    node = top["version"][1]
    version = reader.scalar(node, "version", "integer")
    if version is not None and version != FILE_VERSION:
        reader.fail(
            node,
            "version",
            f"{version} is not supported; this fleetcron reads version {FILE_VERSION}",
        )
        return None
    return int(version) if version is not None else None


def _read_job(reader: Reader, node: Node, index: int) -> JobDecl | None:
    path = f"jobs[{index}]"
    before = len(reader.problems)
    keys = reader.mapping(node, path, JOB_KEYS, "a job (a mapping with name, schedule, ...)")
    if keys is None:
        return None
    values, lines = _job_values(reader, keys, path)

    def fail(key: str | None, message: str) -> None:
        line = lines.get(key, line_of(node)) if key else line_of(node)
        reader.problems.append(Problem(line, f"{path}.{key}" if key else path, message))

    _check_required_and_name(keys, values, fail)
    _check_kind(keys, values, fail)
    if len(reader.problems) > before:
        return None
    spec = {
        SPEC_FIELDS[key]: BY_KEY[key].plain(values[key]) for key in SPEC_FIELDS if key in values
    }
    return JobDecl(
        index=index,
        line=line_of(node),
        name=str(values.get("name")),
        bulk=values.get("bulk") is True,
        target=values.get("target"),
        selector=values.get("selector") or "",
        disabled_on=tuple(values.get("disabled_on") or ()),
        enabled=values.get("enabled", True),
        allow_duplicate=values.get("allow_duplicate", False),
        spec=spec,
        lines=lines,
    )


_Fail = Callable[[str | None, str], None]
"""Records a problem of one job: the key it is about (``None``: the job) and the message."""


def _job_values(
    reader: Reader, keys: dict[str, tuple[Node, Node]], path: str
) -> tuple[dict[str, Any], dict[str, int]]:
    """Each key's value read as its type says (a problem recorded where it is not one),
    and each key's line."""
    values: dict[str, Any] = {}
    lines: dict[str, int] = {}
    for key, (_key_node, value_node) in keys.items():
        kind = _KINDS[key]
        lines[key] = line_of(value_node)
        key_path = f"{path}.{key}"
        if kind == "list of strings":
            values[key] = reader.strings(value_node, key_path)
        elif key in _COUNT_KEYS and getattr(value_node, "tag", None) == TAGS["integer"]:
            values[key] = str(value_node.value)  # a count: `batch: 10` is "10"
        else:
            values[key] = reader.scalar(value_node, key_path, kind)
    return values, lines


def _check_required_and_name(keys: Container[str], values: dict[str, Any], fail: _Fail) -> None:
    for required in ("name", "schedule", "command"):
        if required not in keys:
            fail(None, f"missing required key {required}")
    name = values.get("name")
    if name is not None:
        try:
            v.validate_job_name(name)
        except InvalidInput as exc:
            fail("name", exc.message.removeprefix("name: "))


def _check_kind(keys: Container[str], values: dict[str, Any], fail: _Fail) -> None:
    """A bulk job (``bulk: true``, a selector) or an individual one (``target``), and only
    the keys its kind takes."""
    bulk = values.get("bulk") is True
    if bulk and "target" in keys:
        fail("target", "a bulk job runs on the targets its selector matches; remove target")
    if not bulk and "target" not in keys and "bulk" in keys:
        fail("bulk", "an individual job (bulk: false) needs target: NAME")
    elif not bulk and "target" not in keys:
        fail(None, "a job needs either target: NAME (individual) or bulk: true")
    if not bulk:
        for key in ("selector", "disabled_on"):
            if key in keys:
                fail(key, "applies to bulk jobs only (bulk: true)")
    if bulk and "enabled" in keys:
        fail("enabled", "a bulk job is paused per target with disabled_on: [TARGET, ...]")


# --- states and the plan ----------------------------------------------------------------


@dataclass(frozen=True)
class JobState:
    """A job as plain data, wanted (from the file) or current (from the store).

    Field names are the file's keys. ``target`` is None for a bulk job; ``disabled_on``
    (bulk) is sorted; ``enabled`` (individual) is None while the job has no assignment
    (its target is unpaired).
    """

    name: str
    bulk: bool
    target: str | None
    selector: str
    disabled_on: tuple[str, ...]
    enabled: bool | None
    schedule: str
    timezone: str
    command: str
    notes: str
    timeout: int
    overlap: str
    catchup: str
    jitter: int
    retries: int
    retry_on: tuple[str, ...]
    retry_backoff: int
    allow_duplicate: bool = False
    batch: str = ""
    batch_pause: int = 0
    max_failures: str = ""
    canary: str = ""
    spread: int = 0
    on_blackout: str = "skip"
    run_only_on: str = ""
    never_on: str = ""
    dst_gap: str = "cronie"
    dst_fold: str = "cronie"
    keep_successes_days: int = 0
    keep_failures_days: int = 0


#: The fields a plan compares, in the order a diff shows them.
COMPARED = tuple(f.name for f in fields(JobState) if f.name != "name")


@dataclass(frozen=True)
class FieldChange:
    field: str
    old: Any
    new: Any


@dataclass(frozen=True)
class JobChange:
    """One step of a plan: create, change (with the changed fields) or delete a job."""

    kind: Literal["create", "change", "delete"]
    name: str
    before: JobState | None
    after: JobState | None
    fields: tuple[FieldChange, ...] = ()

    def changed(self, *names: str) -> bool:
        return any(f.field in names for f in self.fields)


@dataclass(frozen=True)
class Plan:
    changes: tuple[JobChange, ...]
    #: Jobs in the store but not in the file, kept because --prune was not given.
    kept: tuple[str, ...] = ()
    #: The calendars the file creates or changes (never deleted by an apply).
    calendars: tuple[CalendarChange, ...] = ()
    #: The blackout windows the file creates or changes (never lifted by an apply).
    blackouts: tuple[BlackoutChange, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.changes and not self.calendars and not self.blackouts

    def count(self, kind: str) -> int:
        return sum(1 for c in self.changes if c.kind == kind)

    def of(self, kind: str) -> list[JobChange]:
        return [c for c in self.changes if c.kind == kind]


def field_changes(before: JobState, after: JobState) -> tuple[FieldChange, ...]:
    out = []
    for name in COMPARED:
        old, new = getattr(before, name), getattr(after, name)
        # An assignment's flag exists only on a paired target; nothing to compare otherwise.
        if name == "enabled" and (old is None or new is None):
            continue
        if old != new:
            out.append(FieldChange(name, old, new))
    return tuple(out)


def plan_changes(wanted: Iterable[JobState], current: Iterable[JobState], *, prune: bool) -> Plan:
    """What to do so that the store holds the wanted jobs: creates and changes in the file's
    order, then (with ``prune``) deletes of jobs the file does not declare."""
    have = {state.name: state for state in current}
    changes: list[JobChange] = []
    declared: set[str] = set()
    for state in wanted:
        declared.add(state.name)
        old = have.get(state.name)
        if old is None:
            changes.append(JobChange("create", state.name, None, state))
            continue
        diff = field_changes(old, state)
        if diff:
            changes.append(JobChange("change", state.name, old, state, diff))
    extra = sorted(name for name in have if name not in declared)
    if prune:
        changes.extend(JobChange("delete", name, have[name], None) for name in extra)
        extra = []
    return Plan(tuple(changes), tuple(extra))


# --- rendering ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Defaults:
    """What a job gets for a key the file leaves out (the service fills this in from the
    declaration's defaults); a rendered job leaves out the keys whose value equals it. An
    option not named here is compared with its declared default."""

    notes: str
    overlap: str
    catchup: str
    jitter: int
    retries: int
    retry_on: tuple[str, ...]
    retry_backoff: int


def job_mapping(
    state: JobState, defaults: Defaults, *, allow_duplicate: bool = False
) -> dict[str, Any]:
    """A job as the file writes it: the options a job must have (schedule, command) and those
    whose default is a setting that may differ elsewhere (zone, timeout) always, the rest
    when they differ from the defaults; ``allow_duplicate`` as the caller marks it."""
    out: dict[str, Any] = {"name": state.name}
    if state.bulk:
        out["bulk"] = True
        if state.selector:
            out["selector"] = state.selector
        if state.disabled_on:
            out["disabled_on"] = list(state.disabled_on)
    else:
        out["target"] = state.target
        if state.enabled is False:
            out["enabled"] = False
    for option in OPTIONS:
        if option.key == "allow_duplicate":
            continue
        value = getattr(state, option.key)
        always = option.required or option.default is None
        if always or value != option.plain(getattr(defaults, option.key, option.default)):
            out[option.key] = list(value) if isinstance(value, tuple) else value
    out["schedule"] = _Quoted(state.schedule)
    if allow_duplicate:
        out["allow_duplicate"] = True
    return out


class _Dumper(yaml.SafeDumper):
    """Block style; multi-line strings as literal blocks, lists of names in brackets."""


class _Quoted(str):
    """A string always written in double quotes (cron expressions: ``*`` starts an alias)."""

    __slots__ = ()


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


def _represent_quoted(dumper: yaml.SafeDumper, data: _Quoted) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", str(data), style='"')


def _represent_list(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.SequenceNode:
    flow = all(isinstance(item, str) and "\n" not in item for item in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_Dumper.add_representer(str, _represent_str)
_Dumper.add_representer(_Quoted, _represent_quoted)
_Dumper.add_representer(list, _represent_list)


@dataclass(frozen=True)
class Rendered:
    """A job to write, with comment lines to put above it."""

    state: JobState
    allow_duplicate: bool = False
    comments: tuple[str, ...] = field(default=())


def render_schedule_file(
    jobs: Iterable[Rendered],
    defaults: Defaults,
    *,
    header: Sequence[str] = (),
    calendars: Sequence[CalendarState] = (),
    blackouts: Sequence[Mapping[str, Any]] = (),
) -> str:
    """The YAML text of a schedule file holding ``calendars``, ``jobs`` and ``blackouts``
    (windows as mappings of their file keys), in the given order."""
    parts = [f"# {line}\n" if line else "#\n" for line in header]
    parts.append(f"version: {FILE_VERSION}\n")
    if calendars:
        parts.append("calendars:\n")
        body = _dump([calendar_mapping(c) for c in calendars])
        parts.extend(f"  {line}\n" for line in body.splitlines())
    items = list(jobs)
    parts.append("jobs:\n" if items else "jobs: []\n")
    for index, item in enumerate(items):
        if index:
            parts.append("\n")
        parts.extend(f"  # {line}\n" for line in item.comments)
        body = _dump([job_mapping(item.state, defaults, allow_duplicate=item.allow_duplicate)])
        parts.extend(f"  {line}\n" for line in body.splitlines())
    parts.extend(_blackouts_text(blackouts))
    return "".join(parts)


def _blackouts_text(blackouts: Sequence[Mapping[str, Any]]) -> list[str]:
    if not blackouts:
        return []
    windows = [
        {key: _Quoted(value) if key == "cron" else value for key, value in window.items()}
        for window in blackouts
    ]
    return ["blackouts:\n"] + [f"  {line}\n" for line in _dump(windows).splitlines()]


def _dump(items: list[dict[str, Any]]) -> str:
    return yaml.dump(
        items,
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=100,
    )


__all__ = [
    "COMPARED",
    "FILE_VERSION",
    "JOB_KEYS",
    "SPEC_FIELDS",
    "Defaults",
    "Duplicate",
    "FieldChange",
    "JobChange",
    "JobDecl",
    "JobState",
    "Plan",
    "Problem",
    "Registration",
    "Rendered",
    "ScheduleFile",
    "ScheduleFileError",
    "duplicates_to_allow",
    "field_changes",
    "find_duplicates",
    "job_mapping",
    "parse_schedule_file",
    "plan_changes",
    "render_schedule_file",
]
