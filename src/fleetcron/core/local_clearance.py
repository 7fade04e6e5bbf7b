"""The rule of the local gate: who may have a command run on a local target.

A command on a local target without ``local_run_as`` (or with it naming the scheduler's own
user) runs with the scheduler's privileges, beside the database and the master key: whoever
wrote it can make themselves admin. Such a command may be assigned to, and dispatched on, a
local target only when its author (``jobs.command_by``/``command_role``) held the role
``local_job_role`` names; whether commands there run privileged is asked of the system by
:func:`fleetcron.executors.local.runs_privileged`. One plain function holds the rule, so the
check where assignments are made (:mod:`fleetcron.services.fleet.local_gate`) and the check
before each local run is dispatched (:func:`fleetcron.store.run_dispatch.target_hold_of`)
cannot drift apart.
"""

from __future__ import annotations

from fleetcron.core.permissions import ROLE_RANK
from fleetcron.core.targets import TargetKind

#: How the reason of a run the gate kept from starting begins (``SkipKind.LOCAL_GATE``).
GATE_PREFIX = "local gate: "


def local_refusal(
    *,
    target_kind: str,
    privileged: bool,
    least_role: str,
    command_by: str | None,
    command_role: str | None,
    job_name: str,
    target_name: str,
) -> str | None:
    """Why the job's command may not run on the target; None when it may."""
    if target_kind != TargetKind.LOCAL or not privileged:
        return None
    if ROLE_RANK.get(command_role or "", -1) >= ROLE_RANK[least_role]:
        return None
    author = (
        f"{command_by} ({command_role})"
        if command_by and command_role
        else "a writer not recorded (a job saved before authors were recorded)"
    )
    return (
        f"{author} may not put a command on the local target {target_name} (job "
        f"{job_name}): local commands run as the scheduler's own user, which needs the "
        f"{least_role} role (settings local_run_as, local_job_role); narrow the job's "
        "selector, or ask an admin to save the job"
    )
