"""Executors: run one command locally or on an SSH target and report how it ended."""

from fleetcron.executors.base import (
    DEFAULT_KILL_GRACE_S,
    DEFAULT_OUTPUT_LIMIT,
    DEFAULT_TIMEOUT_S,
    Clock,
    ExecRequest,
    ExecResult,
    Executor,
    RunTarget,
    SshTarget,
    Status,
    utc_now,
)
from fleetcron.executors.hostkeys import fingerprint, normalize_key_line
from fleetcron.executors.local import LocalExecutor
from fleetcron.executors.output import BoundedOutput, OutputExcerpt
from fleetcron.executors.ssh import SshExecutor
from fleetcron.executors.ssh_connect import fetch_host_key, verify_target

__all__ = [
    "DEFAULT_KILL_GRACE_S",
    "DEFAULT_OUTPUT_LIMIT",
    "DEFAULT_TIMEOUT_S",
    "BoundedOutput",
    "Clock",
    "ExecRequest",
    "ExecResult",
    "Executor",
    "LocalExecutor",
    "OutputExcerpt",
    "RunTarget",
    "SshExecutor",
    "SshTarget",
    "Status",
    "fetch_host_key",
    "fingerprint",
    "normalize_key_line",
    "utc_now",
    "verify_target",
]
