"""Targets: the servers jobs run on.

Owns ``edit`` (add, edit, pause, label, unpair, remove), ``fields`` (validation of a target's
fields), ``pairing`` (reaching a target with its pinned host key), ``reads`` (the views the
adapters show), ``runs`` (a target's recent runs) and ``shares`` (a target shared into
other projects).

It may import core, cron, store, coordination, executors' plain types and the other
service packages below it in the list of docs/architecture.md; never web or cli.
"""
