"""What the scheduler hands an executor for one claimed run: where it runs
(:func:`run_target`), its environment (:func:`run_environment`) and the request with the
watchdog budget left until its claim deadline (:func:`exec_request`)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from urllib.parse import quote

from fleetcron.coordination.claim_check import claim_secret, fencing_token
from fleetcron.core.ownership import watchdog_budget
from fleetcron.crypto import Secret
from fleetcron.executors.base import (
    NOT_STARTED_DEADLINE,
    ExecRequest,
    RunTarget,
)
from fleetcron.executors.output import LiveOutput
from fleetcron.store.run_dispatch import Dispatch


@dataclass(frozen=True)
class ClaimAsking:
    """How a cluster's runs ask the API about their claims: the key of the per-run secrets
    and this node's endpoint (``FLEETCRON_CLAIM_SECRET``, ``FLEETCRON_CLAIM_URL``)."""

    key: Secret = field(repr=False)
    endpoint: str | None


def exec_request(
    dispatch: Dispatch,
    *,
    node: str,
    output_limit: int,
    mark_scope: str | None,
    live: LiveOutput | None,
    asking: ClaimAsking | None = None,
) -> ExecRequest | str:
    """The executor request, with the watchdog budget left at this moment; or why the run
    must not start (its claim deadline is reached)."""
    budget = None
    measured = time.monotonic()
    if dispatch.deadline_at is not None and dispatch.claimed_at is not None:
        elapsed = measured - dispatch.claimed_monotonic
        budget = watchdog_budget(dispatch.deadline_at, dispatch.claimed_at, elapsed)
        if budget <= 0:
            return (
                f"not started: {NOT_STARTED_DEADLINE} (claim deadline "
                f"{dispatch.deadline_at.isoformat()}, {elapsed:.1f} s after the claim)"
            )
    return ExecRequest(
        command=dispatch.command,
        env=run_environment(dispatch, node, asking),
        timeout_s=float(dispatch.timeout_s),
        output_limit=output_limit,
        watchdog_s=budget,
        budget_from=measured if budget is not None else None,
        run_id=dispatch.run_id,
        generation=dispatch.generation,
        mark_scope=mark_scope,
        live=live,
    )


def run_environment(
    dispatch: Dispatch, node: str, asking: ClaimAsking | None = None
) -> dict[str, str]:
    """Variables every command gets, so it can tell which run it is; with high availability
    also ``FLEETCRON_FENCING_TOKEN=<shard>:<generation>:<claim>`` so external systems can
    refuse writes from a stale owner of that shard, and the run's ``FLEETCRON_CLAIM_SECRET`` (with
    ``FLEETCRON_CLAIM_URL`` when this node has an endpoint) to ask the API whether the
    claim is still live."""
    env = {
        "FLEETCRON_RUN_ID": str(dispatch.run_id),
        "FLEETCRON_NODE": node,
        "FLEETCRON_JOB": dispatch.job_name,
        "FLEETCRON_TARGET": dispatch.target_name,
        "FLEETCRON_SCHEDULED_FOR": (
            dispatch.scheduled_for.isoformat() if dispatch.scheduled_for else ""
        ),
    }
    if dispatch.claim_id is not None:
        token = fencing_token(dispatch.shard, dispatch.generation or 0, dispatch.claim_id)
        env["FLEETCRON_FENCING_TOKEN"] = token
        if asking is not None:
            env["FLEETCRON_CLAIM_SECRET"] = claim_secret(asking.key, dispatch.claim_id)
            if asking.endpoint:
                env["FLEETCRON_CLAIM_URL"] = (
                    f"{asking.endpoint.rstrip('/')}/api/v1/claims/{quote(token)}"
                )
    return env


def run_target(dispatch: Dispatch) -> RunTarget:
    """Where ``dispatch`` runs, as the executors see it (the key still encrypted)."""
    return RunTarget(
        name=dispatch.target_name,
        kind=dispatch.target_kind,
        host=dispatch.host,
        port=dispatch.port,
        user=dispatch.user,
        private_key_enc=dispatch.private_key_enc,
        host_key=dispatch.host_key,
        via=tuple(
            RunTarget(
                name=hop.name,
                kind="jump",
                host=hop.host,
                port=hop.port,
                user=hop.user,
                private_key_enc=hop.private_key_enc,
                host_key=hop.host_key,
                host_ca=hop.host_ca,
                client_cert_enc=hop.client_cert_enc,
            )
            for hop in dispatch.via
        ),
        host_ca=dispatch.host_ca,
        client_cert_enc=dispatch.client_cert_enc,
    )
