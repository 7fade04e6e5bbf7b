"""Active cleanup (``active_cleanup``, cluster mode), the scheduler's background task.

Once per shard and generation this node owns (every shard at once after a takeover of
the one owner; with the members placement, each shard the node takes over), when older
generations' claims still hold assignments back on SSH targets, a background task raises
each such target's highest-generation mark and kills the older generations there
(:meth:`~fleetcron.executors.ssh.SshExecutor.mark_and_kill_older_generations`), then
clears those targets' old claims so their shards start on the next tick. While a target's
cleanup is under way its shard's assignments are left alone (:attr:`ActiveCleanup.held`),
so a slot is not decided a moment before the old claims holding its shard may be cleared.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from fleetcron.app import App
from fleetcron.coordination.guard import CoordinatedGuard
from fleetcron.core.planning import TargetCleanup, shards_held_for_cleanup
from fleetcron.executors.base import SshTarget
from fleetcron.executors.kinds import SshKind
from fleetcron.executors.watchdog import shard_scope
from fleetcron.services.cluster import status as cluster
from fleetcron.store.run_guard import RunGuard

log = logging.getLogger("fleetcron.cron")

#: Seconds one target may take (connecting included) to raise its mark and kill the older
#: generations; a target that takes longer keeps waiting for the deadlines.
CLEANUP_TIMEOUT_S = 5.0
#: Targets cleaned at once.
CLEANUP_CONCURRENCY = 32


@dataclass
class ActiveCleanup:
    """The active cleanup of one scheduler: at most one task at a time, once per
    generation. ``in_db`` runs a function on the scheduler's database thread."""

    app: App
    in_db: Callable[..., Awaitable[Any]]
    #: The cleanup under way (or the last one).
    task: asyncio.Task[None] | None = None
    #: Shards left alone while the cleanup of one of their targets is under way.
    held: frozenset[int] = frozenset()
    #: What each cleanup did, in order.
    results: list[cluster.CleanupResult] = field(default_factory=list)
    #: The shards this scheduler executes (a worker of a node; None: every shard).
    shards: frozenset[int] | None = None
    #: The ``(shard, generation)`` pairs already cleaned (once per shard and generation).
    _cleaned: frozenset[tuple[int, int]] = frozenset()

    async def start(
        self,
        guard: RunGuard | None,
        mark_scope: str | None,
        ssh: Callable[[], SshKind],
        may_execute: Callable[[], bool] | None,
    ) -> None:
        """Once per shard and generation this node owns: when assignments wait for a
        previous owner's claims on SSH targets, clean those targets in the background
        (ticks go on, idle work starts at once); see :meth:`_clean`."""
        if (
            not self.app.settings.active_cleanup
            or not isinstance(guard, CoordinatedGuard)
            or guard.unguarded
            or not guard.wait_for_old_claims
            or mark_scope is None
            or (self.task is not None and not self.task.done())
            or (may_execute is not None and not may_execute())
        ):
            return
        try:
            plan = await self.in_db(
                functools.partial(
                    cluster.active_cleanup_plan,
                    self.app,
                    guard.node_id,
                    guard.fingerprint,
                    self._cleaned,
                    self.shards,
                    shared=guard.shared,
                )
            )
        except Exception:
            # Optional work: a failure here must never keep the tick from claiming.
            log.exception(
                "cron: could not plan the active cleanup; retrying next tick",
                extra={"action": "cleanup.error"},
            )
            return
        if plan is None:
            return
        self._cleaned = plan.owned
        if plan.targets:
            self.held = shards_held_for_cleanup(
                plan.claims, plan.generation, {t.target_id for t in plan.targets}
            )
            self.task = asyncio.create_task(
                self._clean(guard, plan, mark_scope, ssh), name="fleetcron-cleanup"
            )

    async def stop(self) -> None:
        """Cancel a cleanup under way (the scheduler is stopping)."""
        if self.task is not None and not self.task.done():
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task

    async def _clean(
        self,
        guard: CoordinatedGuard,
        plan: cluster.CleanupPlan,
        scope: str,
        ssh_kind: Callable[[], SshKind],
    ) -> None:
        """Raise the mark and kill the older generations on every target of ``plan`` (each
        at its shard's generation, under its shard's mark: ``scope`` is the installation's),
        concurrently, each within :data:`CLEANUP_TIMEOUT_S`; then clear the claims of the
        targets that were cleaned (audited). The others keep waiting for the deadlines."""
        ssh = ssh_kind()
        slots = asyncio.Semaphore(CLEANUP_CONCURRENCY)
        t0 = time.monotonic()
        try:
            cleanings = [
                _clean_target(
                    ssh,
                    target,
                    plan.generation_of(target),
                    shard_scope(scope, target.shard, plan.shards),
                    slots,
                )
                for target in plan.targets
            ]
            outcomes, cleared, refused = await self._clear_as_cleaned(guard, plan, cleanings)
            result = await self.in_db(
                functools.partial(
                    cluster.finish_active_cleanup,
                    self.app,
                    plan,
                    outcomes,
                    cleared=cleared,
                    refused=refused,
                )
            )
        except Exception:
            log.exception(
                "cron: could not record the active cleanup", extra={"action": "cleanup.error"}
            )
            return
        finally:
            self.held = frozenset()
        self.results.append(result)
        log.info(
            "cron: active cleanup took %.1f s",
            time.monotonic() - t0,
            extra={"action": "cleanup.done", "cleared_claims": result.cleared_claims},
        )

    async def _clear_as_cleaned(
        self,
        guard: CoordinatedGuard,
        plan: cluster.CleanupPlan,
        cleanings: list[Coroutine[Any, Any, TargetCleanup]],
    ) -> tuple[list[TargetCleanup], int, str | None]:
        """Await the targets' cleanups; clear each cleaned target's claims as soon as it is
        clean, until the database refuses (ownership changed). Returns every target's
        outcome, how many claims were cleared, and the refusal if there was one."""
        outcomes: list[TargetCleanup] = []
        cleared, refused = 0, None
        pending = {t.target_id for t in plan.targets}
        # Each target's claims are cleared as soon as it is clean: an unreachable one
        # (which takes the whole timeout) never holds back the others.
        for finished in asyncio.as_completed(cleanings):
            outcome = await finished
            outcomes.append(outcome)
            if outcome.error is None and refused is None:
                count, refused = await self.in_db(
                    cluster.clear_cleaned_claims,
                    self.app,
                    guard.node_id,
                    guard.fingerprint,
                    plan,
                    [outcome],
                )
                cleared += count
            pending.discard(outcome.target_id)
            self.held = shards_held_for_cleanup(plan.claims, plan.generation, pending)
        return outcomes, cleared, refused


async def _clean_target(
    ssh: SshKind,
    target: cluster.CleanupTarget,
    generation: int,
    scope: str,
    slots: asyncio.Semaphore,
) -> TargetCleanup:
    """Raise the mark and kill the older generations on one target; a failure is logged
    and returned, and that target keeps waiting for the claim deadlines."""
    async with slots:
        try:
            ssh_target = _cleanup_target(ssh, target)
            mark, killed = await ssh.executor.mark_and_kill_older_generations(
                ssh_target, generation, scope, timeout_s=CLEANUP_TIMEOUT_S
            )
        except Exception as exc:  # whatever went wrong, this target keeps waiting
            message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
            log.warning(
                "cron: active cleanup of %s failed: %s; its assignments wait for the "
                "previous owner's claim deadlines",
                target.name,
                message,
                extra={"action": "cleanup.target_failed", "target": target.name},
            )
            return TargetCleanup(target.target_id, None, error=message)
        return TargetCleanup(target.target_id, mark, killed)


def _cleanup_target(ssh: SshKind, target: cluster.CleanupTarget) -> SshTarget:
    """The connection of ``target``, through its jump hosts (each with its own key and
    trust), as a run's; raises ``ValueError`` when a record lacks its SSH settings."""
    return ssh.ssh_target(target.connection)
