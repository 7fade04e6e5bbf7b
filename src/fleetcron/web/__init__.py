"""The web UI and the REST API: thin adapters over the service functions."""
