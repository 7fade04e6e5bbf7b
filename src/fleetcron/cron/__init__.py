"""The cron engine: parse once, then iterate fire times forward or backward.

Exact cronie / Debian cron semantics, with the DST rules of Debian cron and a few documented
extensions (L, LW, DOW#n, DOWL). Pure: no I/O, never reads the clock. See docs/cron.md.
"""

from fleetcron.cron.dst import DstPolicy
from fleetcron.cron.schedule import CronSchedule, parse, parse_cached
from fleetcron.cron.zones import validate_timezone

__all__ = ["CronSchedule", "DstPolicy", "parse", "parse_cached", "validate_timezone"]
