"""The watchdog every command runs under, on the machine that executes it.

The claim deadline of a run is only a promise if the process is gone when it passes,
whatever happens to the scheduler (killed, stopped, cut off from the network). So the
command is not supervised by the scheduler alone: it runs under a wrapper written in
POSIX ``sh`` that uses coreutils ``timeout`` and the target's own monotonic clock, and
that keeps working when the scheduler disappears. The wrapper is used on SSH targets (no
agent to install) and for local commands run as another user (started in a new session);
a local command run as the scheduler's own user is watched instead by the executor's
group watchdog (:mod:`fleetcron.executors.local_watch`), one process for all runs, to
the same deadlines and with the same claim file.

Process layout (``S`` is the session leader: sshd's login shell, or the local
executor's ``/bin/sh`` started with ``setsid``)::

    S  /bin/sh -c <wrapper>            ignores HUP, INT, QUIT, TERM; waits for T
    └─ T  timeout -s TERM -k G A ...   its own process group; pgid T is reported
       └─ /bin/sh -c <check>; <command> (eval)   (same group T)
                                       and everything the command starts

* ``<check>`` (in a cluster: a generation and the installation's mark scope) reads the
  target's highest-generation mark, ``$HOME/.fleetcron/generation-<scope>/``, from inside
  the tagged group T, and exits :data:`SUPERSEDED_EXIT` with a
  ``fleetcron: refused by the target: ...`` line before the command starts when the mark
  is above the run's generation. Active cleanup (:data:`MARK_AND_SCAN_SCRIPT`) writes the
  mark first and scans second; see there why that order leaves no gap.

* At ``A`` seconds ``timeout`` sends SIGTERM (and SIGCONT) to the whole group T, and
  SIGKILL to the whole group ``G`` seconds later, itself included, if the command is
  still there. ``A + G`` is the budget left when the wrapper started.
* If the command's main process ends early but leaves processes in group T (``cmd &``),
  ``timeout`` exits with it; S then starts a detached sweeper that waits until the same
  moment ``A`` by the target's ``/proc/uptime`` (a monotonic clock) and signals what is
  left of the group (TERM, then KILL after ``G``). Without ``/proc/uptime`` (not Linux)
  leftovers are signalled at once. Nothing lingers once the group is empty.
* The claim file (:data:`CLAIM_FILE_VARIABLE`): before ``timeout`` starts, S writes the
  run's deadline on this machine's clock (the moment ``A`` counted from the same
  ``/proc/uptime`` reading the sweeper uses; the wall clock, ``date +%s``, where there is
  no ``/proc/uptime``), its generation, fencing token and mark scope to
  ``$HOME/.fleetcron/claims/run-<id>`` and exports the path, so the command can ask,
  between two of its effects, whether its claim is still live (:data:`CLAIM_CHECK`, no
  fleetcron needed on the target, no process started). The deadline is computed here,
  from the budget, so the clock offset between the scheduler and the target does not
  matter. Stop (:data:`STOP_SCRIPT`) writes ``stopped`` into it before signalling;
  active cleanup after a takeover removes an older generation's file before it kills
  (:data:`REVOKE_SCRIPT`); S removes it when the command's main process has ended.
* The scheduler reads the pgid T from the marker line on stderr (stripped from the
  output) and uses it for its own timeout handling, as before.
* The run's tags (``FLEETCRON_RUN_ID``, ``FLEETCRON_GENERATION``) are exported before
  ``timeout`` starts, so they are in T's ``/proc/T/environ``, which the command cannot
  change: :data:`SCAN_SCRIPT` finds process groups by generation from that, robust to
  pid reuse (a reused pid has another environment).

A command that leaves its process group on purpose (``setsid``, a double fork with
``setpgid``) escapes every process-group based kill, this one included.
"""

from __future__ import annotations

import math
import re
import shlex
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from fleetcron.executors.base import ExecRequest, Status
from fleetcron.executors.output import BoundedOutput

PGID_MARKER: Final = b"__fleetcron_pgid__="
GENERATION_VARIABLE: Final = "FLEETCRON_GENERATION"
SCOPE_VARIABLE: Final = "FLEETCRON_MARK_SCOPE"
"""The run's mark scope (its installation's, and its shard's with more than one shard),
a tag beside its generation: active cleanup kills only the groups of its own scope."""
RUN_ID_VARIABLE: Final = "FLEETCRON_RUN_ID"
MISSING_TIMEOUT: Final = (
    "fleetcron: timeout(1) from coreutils is not on this machine's PATH; "
    "the run's watchdog needs it, so the command was not started"
)
SUPERSEDED_EXIT: Final = 86
"""Exit status of a run the target refused because its mark names a newer generation."""
SUPERSEDED_PREFIX: Final = "fleetcron: refused by the target: "
MARK_PARENT: Final = ".fleetcron"
MARK_SCOPE: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
CLAIM_FILE_VARIABLE: Final = "FLEETCRON_CLAIM_FILE"
CLAIM_DIRECTORY: Final = ".fleetcron/claims"
"""Where the claim files live, under the run user's home (created with mode 0700)."""
CLAIM_CHECK: Final = """\
fleetcron_claim_live() {
  read -r __fc_k __fc_d __fc_r 2>/dev/null <"${FLEETCRON_CLAIM_FILE:-/nonexistent}" || return 1
  case "$__fc_k" in
    uptime) read -r __fc_n __fc_r </proc/uptime || return 1
      __fc_n=$(( ${__fc_n%.*} * 100 + 1${__fc_n#*.} - 100 + ${1:-0} * 100 )) ;;
    epoch) __fc_n=$(( $(date +%s) + ${1:-0} )) ;;
    *) return 1 ;;
  esac
  [ "$__fc_n" -lt "$__fc_d" ]
}
"""
"""The check a command asks between two effects, as a POSIX ``sh`` function:
``fleetcron_claim_live [SECONDS]`` succeeds while the run's claim file says its deadline
is more than ``SECONDS`` (default 0) away by this machine's clock; it fails when the file
is missing (not run by fleetcron, the run over, a home it could not write), says
``stopped``, or the deadline has come. On Linux it starts no process (``read`` and
arithmetic are built into the shell)."""
MIN_STEP_S: Final = 0.01
"""``timeout`` treats 0 as "no limit": every duration handed to it is at least this."""


def split_budget(remaining_s: float, kill_grace_s: float) -> tuple[float, float]:
    """``(term_after, kill_grace)``: SIGTERM at ``term_after``, SIGKILL ``kill_grace``
    later, the two summing to ``remaining_s``. The grace shrinks to at most half the
    budget, so a short budget still gets a SIGTERM first."""
    grace = max(min(kill_grace_s, remaining_s / 2), MIN_STEP_S / 2)
    return max(remaining_s - grace, MIN_STEP_S), grace


@dataclass(frozen=True)
class Plan:
    """When each side signals a run, in seconds from the moment the command starts.

    The executor's own timer (``limit``, then ``grace``) fires first; the watchdog on
    the executing machine (``term_after``, then ``kill_grace``) is the backstop that
    does not need the executor, and has the whole group gone by the budget.
    ``deadline_first`` says the budget, not the request's timeout, set ``limit``.
    """

    limit: float
    grace: float
    term_after: float
    kill_grace: float
    deadline_first: bool


def plan(
    timeout_s: float, watchdog_s: float | None, kill_grace_s: float, elapsed_s: float
) -> Plan | None:
    """The plan for a run whose executor spent ``elapsed_s`` before the command could
    start; ``None`` when the budget is already spent (the run must not start)."""
    budget = watchdog_s if watchdog_s is not None else timeout_s + kill_grace_s
    remaining = budget - elapsed_s
    if remaining <= 0:
        return None
    if watchdog_s is None:
        # Only a backstop: let the executor's own SIGTERM at the timeout come first.
        lag = min(0.5, kill_grace_s / 2)
        term_after = max(remaining - kill_grace_s + lag, MIN_STEP_S)
        return Plan(timeout_s, kill_grace_s, term_after, max(remaining - term_after, 0), False)
    term_after, kill_grace = split_budget(remaining, kill_grace_s)
    limit = min(timeout_s, term_after)
    grace = max(min(kill_grace_s, remaining - limit), MIN_STEP_S / 2)
    return Plan(limit, grace, term_after, kill_grace, term_after < timeout_s)


def plan_for(request: ExecRequest, kill_grace_s: float, called: float) -> Plan | None:
    """:func:`plan` for ``request`` now, its budget spent since it was measured
    (:meth:`ExecRequest.budget_start`; ``called``: when the executor's ``run()`` was)."""
    elapsed = time.monotonic() - request.budget_start(called)
    return plan(request.timeout_s, request.watchdog_s, kill_grace_s, elapsed)


def _seconds(value: float) -> str:
    return f"{max(value, MIN_STEP_S):.3f}"


def exports(env: Mapping[str, str]) -> str:
    """``export NAME='value'; ...`` for each variable (names are checked by ExecRequest)."""
    return "".join(f"export {name}={shlex.quote(value)}; " for name, value in env.items())


def plain_script(command: str, env: Mapping[str, str]) -> str:
    """The wrapper without a watchdog: report ``$$`` as the pgid and ``exec`` the command.

    Only for tests (the negative control showing that the watchdog is what kills).
    """
    return (
        f"{exports(env)}printf '%s\\n' \"{PGID_MARKER.decode()}$$\" >&2; "
        f"exec /bin/sh -c {shlex.quote(command)}"
    )


def mark_directory(scope: str) -> str:
    """The target's highest-generation mark for the installation ``scope``, as a shell
    word (``$HOME`` is expanded on the target: the SSH user's home, or the local run-as
    user's)."""
    if not MARK_SCOPE.fullmatch(scope):
        raise ValueError(f"invalid mark scope {scope!r}")
    return f'"$HOME/{MARK_PARENT}/generation-{scope}"'


def shard_scope(scope: str, shard: int, shards: int) -> str:
    """The mark scope of shard ``shard``'s runs: each shard has its own mark (and its own
    claim files and tagged groups to clean), raised to that shard's generation, so a
    change of one shard's owner never refuses or kills the runs of another. With one
    shard it is the installation's scope, as before shards."""
    if shards <= 1:
        return scope
    return f"{scope}-s{int(shard)}"


def tags(generation: int | None, mark_scope: str | None) -> str:
    """The run's tags as ``sh`` prefix assignments (set on ``timeout``, the group leader):
    its generation and, with it, its mark scope."""
    if generation is None:
        return ""
    tag = f"{GENERATION_VARIABLE}={int(generation)} "
    if mark_scope is not None:
        if not MARK_SCOPE.fullmatch(mark_scope):
            raise ValueError(f"invalid mark scope {mark_scope!r}")
        tag += f"{SCOPE_VARIABLE}={mark_scope} "
    return tag


def guarded_command(
    command: str, generation: int | None, mark_scope: str | None, *, not_after: float | None = None
) -> str:
    """The ``sh -c`` script run inside the tagged group T: refuse, before the command
    starts, when the target's mark names a generation above ``generation``, or when this
    machine's boot clock (``/proc/uptime``, ``CLOCK_BOOTTIME``) has passed ``not_after``
    (a local run's deadline: a scheduler paused after it decided to start the run must not
    start it after its claim's deadline, when a new owner may already run that shard);
    else run the command in the same shell (``eval``, its variables unset first: no second
    shell started, which cost a local run about half its children's CPU).

    The mark check runs in T after ``timeout`` put the group in place with its tag, so an
    active cleanup that writes the mark and then scans either finds this group or is
    seen here (see :data:`MARK_AND_SCAN_SCRIPT`). Without a generation or a scope (a
    standalone installation) there is no mark to check. The clock check reads hundredths
    of a second with shell builtins only (no process started).
    """
    checks = _deadline_check(not_after) if not_after is not None else ""
    if generation is not None and mark_scope is not None:
        checks += (
            f"for __fc_m in {mark_directory(mark_scope)}/*; do "
            '__fc_n=${__fc_m##*/}; case "$__fc_n" in ""|*[!0-9]*) continue;; esac; '
            f'if [ "$__fc_n" -gt {int(generation)} ]; then '
            f"printf '%s\\n' \"{SUPERSEDED_PREFIX}generation {int(generation)} superseded by "
            f'$__fc_n; the command was not started" >&2; exit {SUPERSEDED_EXIT}; fi; done; '
        )
    if not checks:
        return command
    # The command, kept in a variable, is read by eval after the unset has been parsed:
    # it runs as the shell's own script, as `sh -c` would run it, with nothing of ours set.
    run = 'eval "unset __fc_m __fc_n __fc_u __fc_c; $__fc_c"'
    return f"__fc_c={shlex.quote(command)}; {checks}{run}"


def _deadline_check(not_after: float) -> str:
    """Refuse when /proc/uptime (``SECONDS.hh``) is at ``not_after`` or past it."""
    hundredths = math.floor(not_after * 100)
    return (
        "read __fc_u __fc_m < /proc/uptime; __fc_u=${__fc_u%.*}${__fc_u#*.}; "
        f'if [ "$__fc_u" -ge {hundredths} ]; then '
        f"printf '%s\\n' \"{SUPERSEDED_PREFIX}the claim's deadline passed before the command "
        f'started; it was not started" >&2; exit {SUPERSEDED_EXIT}; fi; '
    )


def superseded_error(exit_code: int | None, stderr_text: str) -> str | None:
    """The refusal line when a run exited because the target's mark superseded its
    generation; ``None`` for every other outcome (a command exiting with the same code
    does not print the line)."""
    if exit_code != SUPERSEDED_EXIT:
        return None
    for line in stderr_text.splitlines():
        if line.startswith(SUPERSEDED_PREFIX):
            return line[len("fleetcron: ") :]
    return None


def unless_superseded(
    status: Status, exit_code: int | None, error: str | None, stderr: BoundedOutput
) -> tuple[Status, int | None, str | None]:
    """The outcome, or ``connect_error`` with the target's refusal when the run's
    generation had been superseded (the command was not started)."""
    refused = superseded_error(exit_code, stderr.excerpt().head)
    if refused is not None:
        return "connect_error", None, refused
    return status, exit_code, error


def claim_file_name(run_id: int | None) -> str:
    """The claim file of run ``run_id``, relative to the run user's home; a run without an
    id (an executor called directly) is named by the wrapper's pid on the target."""
    return f"{CLAIM_DIRECTORY}/run-{int(run_id)}" if run_id is not None else ""


@dataclass(frozen=True)
class ClaimFileFields:
    """What a run's claim file says besides its deadline: the run (its id, or the
    wrapper's pid without one), its generation and the installation's mark scope (``-``
    for a standalone run), which active cleanup (:data:`REVOKE_SCRIPT`) reads."""

    run_id: int | None
    generation: int | None
    mark_scope: str | None

    def name(self) -> str:
        return f"run-{int(self.run_id)}" if self.run_id is not None else "pid-$$"

    def words(self) -> tuple[str, str]:
        """The generation and the scope as shell words (checked: an int, and a scope
        matching :data:`MARK_SCOPE`, as :func:`mark_directory` requires)."""
        scope = self.mark_scope if self.mark_scope is not None else "-"
        if scope != "-" and not MARK_SCOPE.fullmatch(scope):
            raise ValueError(f"invalid mark scope {scope!r}")
        return (str(int(self.generation)) if self.generation is not None else "-", scope)


def _claim_file_lines(fields: ClaimFileFields, term_after_s: float, term_cs: int) -> str:
    """The wrapper's lines that write the claim file (no process started on Linux: the
    directory exists after the first run) and export its path; empty when it cannot be
    written, which :data:`CLAIM_CHECK` reads as "not live". The line is ``<clock>
    <deadline> <generation> <fencing token> <scope>``."""
    generation, scope = fields.words()
    return (
        'if [ -n "$__fc_u0" ]; then '
        f'__fc_dl="uptime $(( {_centis("__fc_u0")} + {term_cs} ))"; '
        f'else __fc_dl="epoch $(( $(date +%s) + {int(max(term_after_s, 0))} ))"; fi\n'
        f'__fc_cd="$HOME/{CLAIM_DIRECTORY}"; __fc_cf="$__fc_cd/{fields.name()}"\n'
        '{ [ -d "$__fc_cd" ] || (umask 077 && mkdir -p "$__fc_cd"); '
        f"printf '%s %s %s %s\\n' \"$__fc_dl\" {generation} "
        f'"${{FLEETCRON_FENCING_TOKEN:--}}" {scope} >"$__fc_cf"; }} 2>/dev/null || __fc_cf=\n'
        f'export {CLAIM_FILE_VARIABLE}="$__fc_cf"\n'
    )


def watchdog_script(
    command: str,
    env: Mapping[str, str],
    *,
    term_after_s: float,
    kill_grace_s: float,
    generation: int | None = None,
    mark_scope: str | None = None,
    run_id: int | None = None,
    remove_claim_file: bool = True,
) -> str:
    """The wrapper described in the module docstring, as one ``sh -c`` script.

    ``generation`` is set on ``timeout`` only (a prefix assignment), so the tagged group
    leader is the run's group T; the command inherits the variable. With ``mark_scope``
    the first thing T does is to compare the target's mark with ``generation``
    (:func:`guarded_command`). Without ``remove_claim_file`` the caller removes the claim
    file itself (the local executor, which saves every run an ``rm`` process).
    """
    term, grace = _seconds(term_after_s), _seconds(kill_grace_s)
    term_cs = round(max(term_after_s, MIN_STEP_S) * 100)
    grace_cs = round(max(kill_grace_s, MIN_STEP_S) * 100)
    tag = tags(generation, mark_scope)
    inner = guarded_command(command, generation, mark_scope)
    claim = ClaimFileFields(run_id, generation, mark_scope)
    return (
        f"{exports(env)}\n"
        "trap '' HUP INT QUIT TERM\n"
        "command -v timeout >/dev/null 2>&1 || "
        f"{{ echo {shlex.quote(MISSING_TIMEOUT)} >&2; exit 127; }}\n"
        "__fc_u0=; read __fc_u0 __fc_r 2>/dev/null </proc/uptime\n"
        f"{_claim_file_lines(claim, term_after_s, term_cs)}"
        f"{tag}timeout -s TERM -k {grace} {term} /bin/sh -c {shlex.quote(inner)} &\n"
        "__fc_t=$!\n"
        f"printf '%s\\n' \"{PGID_MARKER.decode()}$__fc_t\" >&2\n"
        'wait "$__fc_t" 2>/dev/null; __fc_rc=$?\n'
        f"{_CLAIM_FILE_REMOVAL if remove_claim_file else ''}"
        'if kill -s 0 -- "-$__fc_t" 2>/dev/null; then (\n'
        f"{_reaper(term_cs, grace_cs, grace)}"
        ") & fi\n"
        'exit "$__fc_rc"\n'
    )


_CLAIM_FILE_REMOVAL: Final = '[ -z "$__fc_cf" ] || rm -f "$__fc_cf"\n'


def _reaper(term_cs: int, grace_cs: int, grace: str) -> str:
    """The body of the subshell left behind when the command's group outlives the shell it
    started: SIGTERM to the group ``term_cs`` centiseconds after the wrapper started,
    SIGKILL ``grace_cs`` later, by the uptime clock (``grace`` seconds of sleep when
    /proc/uptime cannot be read); it exits as soon as the group is gone."""
    return (
        "  exec </dev/null >/dev/null 2>&1\n"
        # Sleep (in steps of at most 1 s, so a group that empties is noticed and its
        # pgid never signalled after it could have been reused) until $1 centiseconds
        # after the wrapper started; succeed if the group is still there.
        "  __fc_until() {\n"
        '    while kill -s 0 -- "-$__fc_t" 2>/dev/null; do\n'
        "      __fc_left=0\n"
        '      if [ -n "$__fc_u0" ] && read __fc_u1 __fc_r </proc/uptime; then\n'
        f"        __fc_left=$(( $1 - ({_centis('__fc_u1')} - {_centis('__fc_u0')}) ))\n"
        "      fi\n"
        '      [ "$__fc_left" -gt 0 ] || return 0\n'
        '      [ "$__fc_left" -gt 100 ] && __fc_left=100\n'
        '      __fc_f=$((__fc_left % 100)); [ "$__fc_f" -lt 10 ] && __fc_f=0$__fc_f\n'
        '      sleep "$((__fc_left / 100)).$__fc_f"\n'
        "    done\n"
        "    return 1\n"
        "  }\n"
        f"  __fc_until {term_cs} || exit 0\n"
        '  kill -s TERM -- "-$__fc_t"; kill -s CONT -- "-$__fc_t"\n'
        f'  [ -n "$__fc_u0" ] || sleep {grace}\n'
        f"  __fc_until {term_cs + grace_cs} || exit 0\n"
        '  kill -s KILL -- "-$__fc_t"\n'
    )


def _centis(variable: str) -> str:
    """Arithmetic for ``12345.67`` in ``$variable`` as 1234567 (no octal surprises)."""
    return f"(${{{variable}%.*}} * 100 + 1${{{variable}#*.}} - 100)"


SCAN_SCRIPT: Final = (
    # $1: the generation, $2 (optional): the mark scope. For every process tagged with a
    # lower generation (and, given a scope, tagged with that scope or with none: a run of
    # a release before the scope tag): kill its group if it leads it, or if the group's
    # leader is gone (a run's leftovers after timeout exited); a pgid stays unused by new
    # processes while its group has members.
    "g=$1; s=${2:-}; n=0; done_=' '; "
    f"for e in $(grep -l '{GENERATION_VARIABLE}=' /proc/[0-9]*/environ 2>/dev/null); do "
    "p=${e#/proc/}; p=${p%/environ}; "
    f"v=$(tr '\\000' '\\n' <\"$e\" 2>/dev/null | sed -n 's/^{GENERATION_VARIABLE}=//p'); "
    'case "$v" in ""|*[!0-9]*) continue;; esac; '
    '[ "$v" -lt "$g" ] || continue; '
    'if [ -n "$s" ]; then '
    f"w=$(tr '\\000' '\\n' <\"$e\" 2>/dev/null | sed -n 's/^{SCOPE_VARIABLE}=//p'); "
    '[ -z "$w" ] || [ "$w" = "$s" ] || continue; fi; '
    'q=$(ps -o pgid= -p "$p" 2>/dev/null | tr -d " "); '
    # 0: the group is outside our PID namespace (kill -0 would hit our own group).
    'case "$q" in ""|0|1|*[!0-9]*) continue;; esac; '
    'case "$done_" in *" $q "*) continue;; esac; '
    '[ "$q" = "$p" ] || [ ! -d "/proc/$q" ] || continue; '
    'kill -s KILL -- "-$q" 2>/dev/null && n=$((n + 1)) && done_="$done_$q "; '
    "done; "
    'echo "killed=$n"'
)
"""``sh -c SCAN_SCRIPT sh <generation> [<scope>]``: prints ``killed=<n>``.

A group is killed when its leader carries the tag (the ``timeout`` of a run, or a
tagged process that made itself a group leader), or when its leader is gone and a member
carries it (what a run left behind after its main process ended). A tagged process in a
group led by an untagged live process is left alone.
"""


MARK_SCRIPT: Final = (
    # $1: the generation, $2: the installation's scope. The mark is a directory with one
    # empty entry per generation that cleaned this target; its value is the highest name.
    # Creating an entry is atomic (the name appears at once, complete) and an entry is
    # only ever removed by a cleanup of a higher generation, so the mark never goes down,
    # even when two cleanups of different generations run at once.
    "g=$1; s=$2; "
    'case "$g" in ""|*[!0-9]*) echo "bad generation" >&2; exit 2;; esac; '
    # The scan after the mark must be able to see and kill: without Linux's /proc or one of
    # its tools it would find nothing and report success. Refuse instead (not cleaned).
    '[ -r "/proc/$$/environ" ] || { echo "no Linux /proc on this target" >&2; exit 4; }; '
    "for t in grep tr sed ps kill; do command -v $t >/dev/null 2>&1 || "
    '{ echo "$t is not on this target\'s PATH" >&2; exit 4; }; done; '
    'case "$s" in ""|*[!A-Za-z0-9_-]*) echo "bad scope" >&2; exit 2;; esac; '
    f'd="$HOME/{MARK_PARENT}/generation-$s"; '
    'umask 077; mkdir -p "$d" && : >"$d/$g" && [ -f "$d/$g" ] || '
    '{ echo "cannot write the mark $d/$g" >&2; exit 3; }; '
    'hi=$g; for m in "$d"/*; do n=${m##*/}; case "$n" in ""|*[!0-9]*) continue;; esac; '
    'if [ "$n" -lt "$g" ]; then rm -f "$m"; elif [ "$n" -gt "$hi" ]; then hi=$n; fi; done; '
    'echo "mark=$hi"; '
)
"""The first half of :data:`MARK_AND_SCAN_SCRIPT`: raise the target's mark to ``$1``."""

REVOKE_SCRIPT: Final = (
    # After MARK_SCRIPT ($g, $s set): remove the claim files of this installation's runs
    # of an older generation, so that their commands' next fleetcron_claim_live fails
    # before the scan kills them (and for whatever of them the kill cannot reach). One
    # rm for all of them; none when there is nothing to revoke. Claim files of another
    # installation (another scope), of standalone runs ("-") and symlinks are left alone.
    f'c="$HOME/{CLAIM_DIRECTORY}"; r=; n=0; '
    'for f in "$c"/run-* "$c"/pid-*; do '
    '[ -f "$f" ] && [ ! -h "$f" ] || continue; '
    '{ read -r k d v t o x <"$f"; } 2>/dev/null || continue; '
    '[ "$o" = "$s" ] || continue; '
    'case "$v" in ""|*[!0-9]*) continue;; esac; '
    '[ "$v" -lt "$g" ] || continue; '
    'case "${f##*/}" in *[!A-Za-z0-9-]*) continue;; esac; '
    'r="$r ${f##*/}"; n=$((n + 1)); '
    "done; "
    '[ -z "$r" ] || (cd "$c" && exec rm -f -- $r) || '
    '{ echo "cannot remove the claim files of generations below $g in $c" >&2; exit 5; }; '
    'echo "revoked=$n"; '
)
"""The second part of :data:`MARK_AND_SCAN_SCRIPT`: revoke the older generations' claim
files (see :data:`CLAIM_FILE_VARIABLE`): removed, which :data:`CLAIM_CHECK` reads as "not
live"; prints ``revoked=<n>``. A run whose claim file is written after this pass reads
the mark after it too (the wrapper writes the file before its group reads the mark) and
so never starts its command."""

MARK_AND_SCAN_SCRIPT: Final = MARK_SCRIPT + REVOKE_SCRIPT + SCAN_SCRIPT
"""``sh -c MARK_AND_SCAN_SCRIPT sh <generation> <scope>``: prints ``mark=<m>``,
``revoked=<r>`` then ``killed=<n>``; exits non-zero, before any kill, when the mark
cannot be written or the older claim files cannot be removed.

The order is what makes the cleanup safe. A run of an older generation puts its tagged
group in place, then reads the mark (:func:`guarded_command`). The cleanup writes the
mark, then lists the processes. So either the run's group existed when the list was
taken (it is killed), or it came later, and then its read of the mark came after the
mark was written (it refuses to start). A paused old owner that resumes, or an exec
request still on the network, can therefore not start a command after the cleanup.
"""


STOP_POLL_S: Final = 0.1
"""How often :data:`STOP_SCRIPT` looks whether the group still has live members."""

STOP_SCRIPT: Final = (
    # $1: the run's pgid, $2: the grace in tenths of a second, $3 (optional): the run's
    # claim file (relative to $HOME, or absolute), which says "stopped" from here on.
    # TERM (and CONT, so a stopped process sees it) to the whole group; wait while any
    # member of the group is alive (a zombie is not: its parent or init reaps it, it runs
    # nothing), up to the grace; then KILL what is left. "ended" or "killed" tells which.
    'p=$1; n=$2; case "$p" in ""|0|1|*[!0-9]*) echo "bad pgid" >&2; exit 2;; esac; '
    'f=${3:-}; case "$f" in ""|/*) ;; *) f="$HOME/$f";; esac; '
    '{ [ -z "$f" ] || [ ! -f "$f" ] || [ -h "$f" ] || echo stopped >"$f"; } 2>/dev/null; '
    'kill -s TERM -- "-$p" 2>/dev/null || { echo ended; exit 0; }; '
    'kill -s CONT -- "-$p" 2>/dev/null; '
    "if command -v ps >/dev/null 2>&1 && command -v awk >/dev/null 2>&1; then "
    "__fc_live() { ps -A -o pgid= -o stat= 2>/dev/null | "
    "awk -v g=\"$p\" '$1 == g && $2 !~ /^Z/ { f = 1 } END { exit !f }'; }; "
    'else __fc_live() { kill -s 0 -- "-$p" 2>/dev/null; }; fi; '
    "i=0; "
    f'while [ "$i" -lt "$n" ] && __fc_live; do sleep {STOP_POLL_S}; i=$((i + 1)); done; '
    'if __fc_live; then kill -s KILL -- "-$p" 2>/dev/null; echo killed; else echo ended; fi'
)
"""``sh -c STOP_SCRIPT sh <pgid> <tenths>``: how a run is ended by Stop and by its
timeout, on SSH targets (in a second session on the run's connection) and locally.

Every process of the run's group gets SIGTERM (and SIGCONT) at once: the command may
clean up and exit, and the processes it started in the background (``cmd &``, which
outlive a main process that only waits for its foreground child) get it too. Whatever
is still alive in the group after the grace (:data:`~fleetcron.core.ownership.
DEFAULT_KILL_GRACE_S`, the ``kill_grace_s`` of the executors) is killed with SIGKILL;
a group that empties earlier ends the wait. Zombies are not waited for: a process that
exited is reaped by its parent, or by the machine's init once its parent is gone.
Prints ``ended`` (the group left on SIGTERM) or ``killed`` (SIGKILL was needed).
"""


def stop_argv(pgid: int, grace_s: float, claim_file: str = "") -> list[str]:
    """The argv that ends group ``pgid`` (:data:`STOP_SCRIPT`) after a grace of ``grace_s``,
    first writing ``stopped`` into ``claim_file`` (when given and still there)."""
    tenths = max(round(grace_s / STOP_POLL_S), 0)
    return ["/bin/sh", "-c", STOP_SCRIPT, "sh", str(int(pgid)), str(tenths), claim_file]


def stop_command(pgid: int, grace_s: float, claim_file: str = "") -> str:
    """:func:`stop_argv` as one command line (for an SSH session)."""
    return shlex.join(stop_argv(pgid, grace_s, claim_file))
