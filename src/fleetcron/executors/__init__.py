"""Executors: run one command locally or on an SSH target and report how it ended.

The names below are loaded on first use (PEP 562): importing one submodule, say
``executors.base`` for a dataclass, does not load the SSH client library (about a third of a
CLI command's start-up), which only the commands that reach a target need.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

#: Each exported name and the submodule that defines it.
_HOMES = {
    **dict.fromkeys(
        (
            "DEFAULT_KILL_GRACE_S",
            "DEFAULT_OUTPUT_LIMIT",
            "DEFAULT_TIMEOUT_S",
            "Clock",
            "ExecRequest",
            "ExecResult",
            "Executor",
            "RunTarget",
            "SshTarget",
            "Status",
            "utc_now",
        ),
        "base",
    ),
    "fingerprint": "hostkeys",
    "normalize_key_line": "hostkeys",
    "LocalExecutor": "local",
    "BoundedOutput": "output",
    "OutputExcerpt": "output",
    "SshExecutor": "ssh",
    "fetch_host_key": "ssh_connect",
    "verify_target": "ssh_connect",
}

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


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
