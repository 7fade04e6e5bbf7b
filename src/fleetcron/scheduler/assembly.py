"""The composition root: how one scheduler process is put together from its Settings.

``fleetcron serve``/``fleetcron scheduler`` (``cli/serve_cmd.py``), the fault harness's
node process and the benchmarks all build their scheduler here, so what they run is what
production runs:

- :func:`prepare` opens the :class:`~fleetcron.app.App` (the embedded SQLite
  default sets itself up on first start: data directory, schema, master key, first admin);
- :func:`build_scheduler` builds the scheduler: the executor table (local and SSH, sized
  from the settings; :mod:`fleetcron.executors.kinds`), housekeeping before every tick
  (lease renewal, cluster maintenance, retention), and in cluster mode the node's
  announcement, the coordination secret, the ownership guard and, with ``lease_s``, the
  lease that fences the node itself. The scheduler runs the notification rounds beside its
  ticks (:mod:`fleetcron.services.alerts.runner`).

The web server is not built here: the CLI attaches it to the scheduler this returns.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Mapping

from fleetcron.app import SYSTEM, App
from fleetcron.config import Settings
from fleetcron.coordination.node import GUARDED, GuardPolicy
from fleetcron.core.members import Worker
from fleetcron.crypto import create_key_file
from fleetcron.errors import InvalidInput
from fleetcron.executors.base import Executor
from fleetcron.metrics import Metrics
from fleetcron.scheduler.housekeeping import Housekeeping
from fleetcron.scheduler.service import Scheduler
from fleetcron.services import setup
from fleetcron.services.cluster import status as cluster
from fleetcron.services.cluster.secrets import ensure_secret
from fleetcron.services.cluster.status import Node
from fleetcron.services.cluster.workers import WorkerMembership
from fleetcron.store.db import application_name

log = logging.getLogger(__name__)


def prepare(settings: Settings) -> App:
    """Open the app; the embedded default (SQLite) sets itself up on first start."""
    app = App.open(settings)
    if settings.is_sqlite:
        settings.data_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        app.db.ensure_current(auto_upgrade=True)
        if settings.master_key is None and not settings.effective_master_key_file.exists():
            create_key_file(settings.effective_master_key_file)
        if setup.needs_admin(app):
            _first_admin(app, settings)
    else:
        app.db.ensure_current()
    setup.log_data_dir_warning(settings)
    app.master_key  # noqa: B018 - stop now if the master key is missing or unusable
    return app


def _first_admin(app: App, settings: Settings) -> None:
    password = secrets.token_urlsafe(12)
    setup.init(app, admin_name="admin", admin_password=password)
    path = setup.write_initial_password(settings, password)
    log.warning(
        "created the first admin user 'admin'; its password is in %s "
        "(change it with `fleetcron user passwd admin`)",
        path,
        extra={"action": "init.admin"},
    )


def build_scheduler(
    app: App,
    metrics: Metrics | None = None,
    *,
    executors: Mapping[str, Executor] | None = None,
    guard_policy: GuardPolicy = GUARDED,
    worker: Worker | None = None,
) -> Scheduler:
    """The scheduler of this process: guarded by ownership in cluster mode, with
    housekeeping (cluster maintenance, retention) every ``maintenance_interval_s``.

    ``worker``: this process is one of several workers of its node (cluster mode only,
    ``fleetcron scheduler --workers N``): it executes its own shards, and only worker 0
    does the node's periodic work.

    ``executors`` replaces the standard table (tests and benchmarks that measure the
    scheduler alone pass :class:`fleetcron.executors.fake.FakeExecutor`).
    ``guard_policy`` is the cluster guard's: only the fault tests' negative controls pass
    another than :data:`~fleetcron.coordination.node.GUARDED`.
    """
    if app.settings.cluster:
        return _cluster_scheduler(app, metrics, executors, guard_policy, worker)
    if worker is not None and worker.count > 1:
        raise InvalidInput(
            f"workers: {worker.count} needs a cluster on PostgreSQL (FLEETCRON_CLUSTER=true); "
            "a standalone installation runs one scheduler process",
            field="workers",
            value=str(worker.count),
            allowed="1 without FLEETCRON_CLUSTER",
        )
    return Scheduler(
        app,
        maintenance=Housekeeping(app),
        metrics=metrics,
        clock=app.clock,
        executors=executors,
    )


def _cluster_scheduler(
    app: App,
    metrics: Metrics | None,
    executors: Mapping[str, Executor] | None,
    guard_policy: GuardPolicy,
    worker: Worker | None,
) -> Scheduler:
    """A scheduler whose every run write is checked by the ownership guard."""
    node = Node(app, guard_policy)
    # The node id names its sessions: a new owner can end them once its lease expired.
    app.db.rename(application_name(node.identity.node_id, "scheduler"))
    cluster.announce(app, node)
    ensure_secret(app, SYSTEM)
    log.info(
        "cluster: this is node %s (%s)",
        node.identity.node_id,
        node.identity.endpoint,
        extra={"action": "cluster.node", "node": node.identity.node_id},
    )
    lease = cluster.Lease(app, node) if app.settings.lease_s is not None else None
    shared = app.settings.shard_placement == "members"
    if lease is not None and shared:
        lease.shared, lease.places_shards = True, worker is None or worker.first
    membership = None
    extra: list[tuple[str, float, Callable[[], object]]] = []
    if shared or (worker is not None and worker.count > 1):
        # With the members placement a node's only process registers too (worker 0 of 1).
        membership = WorkerMembership(app, node.identity.node_id, worker or Worker(0, 1))
        if lease is not None:
            lease.also_renew = membership.renew_in
        else:
            every = app.settings.maintenance_interval_s
            extra.append(("member heartbeat", every, membership.heartbeat))
    housekeeping = Housekeeping(
        app, lease=lease, extra=extra, node_wide=worker is None or worker.first
    )
    return Scheduler(
        app,
        guard=node.guard(lease_holds=lease.holds if lease else None),
        maintenance=housekeeping,
        renewal=housekeeping.renew_if_due if lease else None,
        metrics=metrics,
        clock=app.clock,
        may_execute=lease.holds if lease else None,
        executors=executors,
        membership=membership,
    )
