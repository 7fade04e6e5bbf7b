"""Pure decisions of fleetcron: plain functions over plain data, no I/O, no clock."""
