"""Service functions: the operations of fleetcron, shared by the CLI, the API and the web.

Each takes the :class:`~fleetcron.app.App`, the acting
:class:`~fleetcron.app.Actor` and plain arguments; each checks the role,
validates the input, writes in one transaction and records an audit event, including
for attempts that fail.
"""
