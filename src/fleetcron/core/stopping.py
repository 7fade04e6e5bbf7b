"""What stopping a run does, said once for the confirmation page, the API and ``runs stop``.

Pure: the facts of a run (its status, job, target, node, start) are passed in.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from fleetcron.core.ownership import DEFAULT_KILL_GRACE_S
from fleetcron.core.statuses import RunStatus

#: Seconds between the SIGTERM a stop sends to a run's process group and the SIGKILL to
#: whatever of it is still alive (the executors' grace, ``executors/watchdog.py``).
STOP_GRACE_S = DEFAULT_KILL_GRACE_S


def what_stop_does(status: str) -> str:
    """One sentence: what a stop does to a run in ``status``."""
    if status == RunStatus.RUNNING:
        return (
            "Stop sends SIGTERM to the command's whole process group on the target (its "
            f"children included), then SIGKILL to what is still alive {STOP_GRACE_S:g} s "
            "later; the run is recorded as cancelled. Nothing is retried."
        )
    return "The run has not started: it is cancelled and never starts. Nothing is retried."


@dataclass(frozen=True)
class StopFacts:
    """What an operator confirms before stopping a run."""

    run_id: int
    job: str
    target: str
    status: str
    node: str
    started_at: datetime | None
    command: str
    #: Who already asked for a stop, and when (the first request is kept).
    requested_by: str | None
    requested_at: datetime | None

    @property
    def effect(self) -> str:
        return what_stop_does(self.status)

    @property
    def verb(self) -> str:
        """The button's word: ``Stop`` a running run, ``Cancel`` one that has not started."""
        return "Stop" if self.status == RunStatus.RUNNING else "Cancel"
