"""The `fleetcron` command line: a thin adapter over the service functions."""
