"""fleetcron: cron for fleets of servers that never runs a job twice."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("fleetcron")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = ["__version__"]
