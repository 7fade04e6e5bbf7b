"""Coordination between fleetcron nodes: who a node is, signed messages, and ownership."""
