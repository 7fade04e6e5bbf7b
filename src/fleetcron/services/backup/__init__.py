"""Backups of the whole state in one file, and restoring them.

Owns ``create`` (backup and restore), ``archive`` (the file's format) and ``postgres``
(dumping and loading PostgreSQL).

It may import core, cron, store, coordination, executors' plain types and the other
service packages below it in the list of docs/architecture.md; never web or cli.
"""
