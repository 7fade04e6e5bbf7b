"""`fleetcron cluster ...`: nodes, ownership, handoff, takeover (see docs/high-availability.md)."""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import click

from fleetcron.app import App
from fleetcron.cli.context import acting, as_user_option, opened_app
from fleetcron.cli.output import print_json, print_table
from fleetcron.core.topology import Topology
from fleetcron.services.cluster import status as svc
from fleetcron.services.cluster.status import ClusterStatus, Node, TransferResult

if TYPE_CHECKING:
    from fleetcron.services.cluster.pins import PinResult

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")


def _node(app: App) -> Node | None:
    return Node(app) if app.settings.cluster else None


def _require_node(app: App) -> Node:
    node = _node(app)
    if node is None:
        raise click.UsageError(
            "this node is standalone; set FLEETCRON_CLUSTER=true to join a cluster"
        )
    return node


def status_dict(status: ClusterStatus) -> dict[str, Any]:
    data = asdict(status)
    data["summary"] = status.one_line()
    return data


def _transfer(result: TransferResult, as_json: bool) -> None:
    if as_json:
        print_json(asdict(result))
        return
    generation = f", generation {result.generation_after}" if result.generation_after else ""
    click.echo(
        f"transfer {result.id} ({result.kind}) to {result.to_node}: {result.state}{generation}"
    )
    if result.state == "pending":
        click.echo(
            "the owner is draining: it starts no new runs and hands over when its runs finish"
        )


@click.group()
def cluster() -> None:
    """High availability: several nodes, at most one runs the jobs."""


@cluster.command("status")
@json_option
@as_user_option
def status(as_json: bool, as_user: str | None) -> None:
    """Owner, generation, pending transfer and where work is running."""
    with opened_app() as app:
        result = svc.status(app, acting(app, as_user), _node(app))
    if as_json:
        print_json(status_dict(result))
        return
    click.echo(result.one_line())
    if result.mode == "cluster":
        click.echo(f"this node: {result.this_node}")
        if result.pending_transfer:
            t = result.pending_transfer
            click.echo(f"pending transfer {t.id}: {t.from_node} -> {t.to_node} ({t.state})")
        if result.verdict:
            may = "yes" if result.verdict.may_claim else "no"
            click.echo(f"this node may run jobs: {may} ({result.verdict.reason})")


@cluster.command("nodes")
@json_option
@as_user_option
def nodes(as_json: bool, as_user: str | None) -> None:
    """Every node: candidates, approved and retired."""
    with opened_app() as app:
        result = svc.status(app, acting(app, as_user), _node(app))
    if as_json:
        print_json([asdict(n) for n in result.nodes])
        return
    print_table(
        None,
        ["node", "host", "endpoint", "state", "running", "owner"],
        [
            (
                n.node_id,
                n.hostname,
                n.endpoint,
                n.state + (" (fenced)" if n.fenced else "") + (" (drained)" if n.drained else ""),
                n.running,
                "yes" if n.node_id == result.owner else "",
            )
            for n in result.nodes
        ],
    )


def _seconds(value: float | None) -> str:
    if value is None:
        return ""
    return f"in {value:.1f} s" if value > 0 else f"{-value:.1f} s ago"


@cluster.command("shards")
@json_option
@as_user_option
def shards(as_json: bool, as_user: str | None) -> None:
    """Each shard: owner, generation, lease, targets and runs on it."""
    from fleetcron.services.cluster.shards import shard_view

    with opened_app() as app:
        view = shard_view(app, acting(app, as_user), _node(app))
    if as_json:
        print_json(asdict(view))
        return
    print_table(
        None,
        [
            "shard",
            "owner",
            "generation",
            "lease expires",
            "targets",
            "running",
            "waiting",
            "pin",
            "placed on",
        ],
        [
            (
                s.shard,
                (s.owner or "(none)") + (" (draining)" if s.draining else ""),
                s.generation,
                _seconds(s.lease_expires_in_s),
                s.targets,
                s.running,
                s.waiting,
                _pin(s.pinned_to, s.pin_ignored),
                _placed(s.placed_on, s.misplaced),
            )
            for s in view.shards
        ],
    )


def _placed(node: str | None, misplaced: bool) -> str:
    """Where the members placement puts a shard, marked when its owner is another."""
    if node is None:
        return ""
    return node + (" (moving, or the nodes disagree)" if misplaced else "")


def _pin(node: str | None, ignored: str | None) -> str:
    """A shard's pin as a cell: its node, and why the placement ignores it."""
    if node is None:
        return ""
    return node + (f" (ignored: {ignored})" if ignored else "")


@cluster.command("members")
@json_option
@as_user_option
def members(as_json: bool, as_user: str | None) -> None:
    """Scheduler processes registered as members: weight, heartbeat, live or not."""
    from fleetcron.services.cluster.shards import member_view

    with opened_app() as app:
        view = member_view(app, acting(app, as_user))
    if as_json:
        print_json([asdict(m) for m in view])
        return
    print_table(
        None,
        ["member", "weight", "heartbeat", "lease expires", "live"],
        [
            (
                m.name,
                f"{m.weight:g}",
                f"{m.heartbeat_age_s:.1f} s ago",
                _seconds(m.lease_expires_in_s),
                "yes" if m.live else "no",
            )
            for m in view
        ],
    )


@cluster.command("approve")
@click.argument("endpoint")
@json_option
@as_user_option
def approve(endpoint: str, as_json: bool, as_user: str | None) -> None:
    """Approve the candidate answering a signed identity challenge at ENDPOINT."""
    from fleetcron.services.cluster.peers import approve_endpoint

    with opened_app() as app:
        _require_node(app)
        row = approve_endpoint(app, acting(app, as_user), endpoint)
    if as_json:
        print_json(
            {
                "node": row.node_id,
                "hostname": row.hostname,
                "endpoint": row.endpoint,
                "state": row.state,
                "aliases": row.aliases,
            }
        )
        return
    click.echo(f"node {row.node_id} ({row.hostname}, {row.endpoint}) approved")


@cluster.command("retire")
@click.argument("node_id")
@json_option
@as_user_option
def retire(node_id: str, as_json: bool, as_user: str | None) -> None:
    """Retire a node for good (kept for audit; its endpoint becomes reusable)."""
    with opened_app() as app:
        svc.retire(app, acting(app, as_user), node_id)
    if as_json:
        print_json({"node": node_id, "state": "retired"})
        return
    click.echo(f"node {node_id} retired")


@cluster.command("drain")
@click.argument("node_id")
@json_option
@as_user_option
def drain(node_id: str, as_json: bool, as_user: str | None) -> None:
    """Move a node's shards to the other nodes, each once its runs ended, and give it
    none until `cluster undrain` (FLEETCRON_SHARD_PLACEMENT=members)."""
    _set_drained(node_id, as_json, as_user, drained=True)


@cluster.command("undrain")
@click.argument("node_id")
@json_option
@as_user_option
def undrain(node_id: str, as_json: bool, as_user: str | None) -> None:
    """End a node's drain: it takes its share of the shards again."""
    _set_drained(node_id, as_json, as_user, drained=False)


def _set_drained(node_id: str, as_json: bool, as_user: str | None, *, drained: bool) -> None:
    with opened_app() as app:
        changed = svc.set_drained(app, acting(app, as_user), node_id, drained=drained)
    if as_json:
        print_json({"node": node_id, "drained": drained, "changed": changed})
        return
    word = "drained" if drained else "no longer drained"
    click.echo(f"node {node_id} {word}" + ("" if changed else " (it already was)"))


@cluster.group("shard")
def shard() -> None:
    """Pin a shard to a node, or unpin it (FLEETCRON_SHARD_PLACEMENT=members)."""


@shard.command("move")
@click.argument("shard_no", metavar="SHARD", type=int)
@click.option("--to", "to_node", required=True, help="Node id of the node to run the shard.")
@json_option
@as_user_option
def shard_move(shard_no: int, to_node: str, as_json: bool, as_user: str | None) -> None:
    """Pin SHARD to a node: its owner drains it and hands it over once its runs ended. The
    pin holds while the node is a live, approved, unfenced, undrained member; otherwise
    the shard is placed as any other (`cluster shards` says why) until it is again."""
    from fleetcron.services.cluster.pins import pin_shard

    with opened_app() as app:
        result = pin_shard(app, acting(app, as_user), shard_no, to_node)
    _pinned(result, as_json)


@shard.command("unpin")
@click.argument("shard_no", metavar="SHARD", type=int)
@json_option
@as_user_option
def shard_unpin(shard_no: int, as_json: bool, as_user: str | None) -> None:
    """Remove SHARD's pin: the placement decides again (the shard stays where it is until
    a join, a leave or a drain moves it)."""
    from fleetcron.services.cluster.pins import unpin_shard

    with opened_app() as app:
        result = unpin_shard(app, acting(app, as_user), shard_no)
    _pinned(result, as_json)


def _pinned(result: PinResult, as_json: bool) -> None:
    if as_json:
        print_json(asdict(result))
        return
    same = "" if result.changed else " (it already was)"
    if result.node is None:
        click.echo(f"shard {result.shard} unpinned{same}; owner: {result.owner or '(none)'}")
        return
    click.echo(f"shard {result.shard} pinned to {result.node}{same}")
    if result.ignored:
        click.echo(f"the pin is ignored for now: {result.ignored}")
    elif result.owner != result.node:
        click.echo(
            f"its owner ({result.owner or 'none'}) drains it and hands it over once its "
            "runs ended: `fleetcron cluster shards` shows the move"
        )


@cluster.command("transfer")
@click.option("--to", "to_node", required=True, help="Node id of the new owner.")
@click.option("--idempotency-key", help="Retrying with the same key returns the same transfer.")
@json_option
@as_user_option
def transfer(to_node: str, idempotency_key: str | None, as_json: bool, as_user: str | None) -> None:
    """Hand the jobs to another approved node (drains the owner first)."""
    with opened_app() as app:
        _require_node(app)
        if app.settings.topology is Topology.REPLICATED_PAIR:
            # Made by the owner: from the other node, a signed request to it.
            from fleetcron.services.cluster import pair_transfer

            result = pair_transfer.request_transfer(
                app, acting(app, as_user), to_node, idempotency_key=idempotency_key
            )
        else:
            result = svc.request_transfer(
                app, acting(app, as_user), to_node, idempotency_key=idempotency_key
            )
    _transfer(result, as_json)


@cluster.command("takeover")
@click.option("--fenced-endpoint", required=True, help="The unreachable owner's exact endpoint.")
@click.option("--confirm-fenced", is_flag=True, help="The old owner is powered off or cut off.")
@click.option(
    "--targets-verified",
    is_flag=True,
    help="You checked that no command of the old owner still runs on any target: start "
    "every assignment now instead of waiting for the old owner's claim deadlines (audited).",
)
@json_option
@as_user_option
def takeover(
    fenced_endpoint: str,
    confirm_fenced: bool,
    targets_verified: bool,
    as_json: bool,
    as_user: str | None,
) -> None:
    """Make this node the owner now; only after fencing the old owner.

    Assignments whose old claims have not reached their deadlines start once they do
    (their slots meanwhile are skipped with the reason), unless --targets-verified."""
    with opened_app() as app:
        node = _require_node(app)
        result = svc.takeover(
            app,
            acting(app, as_user),
            node,
            fenced_endpoint,
            confirm_fenced=confirm_fenced,
            targets_verified=targets_verified,
        )
    _transfer(result, as_json)


@cluster.command("verify-rejoin")
@json_option
@as_user_option
def verify_rejoin(as_json: bool, as_user: str | None) -> None:
    """Checks a returning node must pass before its scheduler may work again."""
    with opened_app() as app:
        node = _require_node(app)
        verdict = svc.verify_rejoin(app, acting(app, as_user), node)
    if as_json:
        print_json(asdict(verdict))
        return
    click.echo(f"rejoin verified: {verdict.reason}")


@cluster.command("rotate-secret")
@json_option
@as_user_option
def rotate_secret(as_json: bool, as_user: str | None) -> None:
    """New coordination secret; the previous one is accepted for 24 hours."""
    from fleetcron.services.cluster.secrets import rotate_secret as rotate

    with opened_app() as app:
        _require_node(app)
        rotation = rotate(app, acting(app, as_user))
    if as_json:
        print_json(asdict(rotation))
        return
    click.echo(
        f"coordination secret rotated: now {rotation.key_id}; the previous one "
        f"({rotation.previous_key_id}) is accepted until {rotation.previous_accepted_until}"
    )


@cluster.command("maintain")
@json_option
def maintain(as_json: bool) -> None:
    """Expire claims past their deadline and progress pending transfers, once."""
    with opened_app() as app:
        _require_node(app)
        result = svc.maintain(app)
    if as_json:
        print_json(asdict(result))
        return
    click.echo(
        f"expired {result.expired_claims} claim(s); completed transfer(s): "
        f"{', '.join(map(str, result.completed_transfers)) or 'none'}"
    )


from fleetcron.cli.replication_cmd import replication  # noqa: E402 - registered last

cluster.add_command(replication)
