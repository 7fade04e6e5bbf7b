# Sourced by the Makefile's test targets (POSIX sh): points TMPDIR at a fresh directory in
# memory for the run and removes it when the run ends.
#
# Everything the suite writes goes under TMPDIR: each test's SQLite database, the PostgreSQL
# clusters, the fault scenarios' node directories, the wheel's venv. On a disk file system
# those writes cost the kernel journal and page-cache work: the web tests spend about 40 %
# less system CPU (27 -> 16 CPU-s) on a tmpfs. /dev/shm is a tmpfs on every Linux machine; where it
# is missing or not writable the run keeps the usual TMPDIR. FLEETCRON_TEST_TMP=disk keeps it
# too (to run the suite on the file system users' databases live on).
#
# The directory is 0755: the embedded PostgreSQL runs as the `postgres` user when the tests
# run as root, and that user must reach its cluster below it.
#
# A run killed outright (SIGKILL) cannot remove its directory, and a tmpfs holds its files in
# memory until they are removed: each directory records the shell that made it, and the
# next run removes this user's directories whose shell is gone.
if [ "${FLEETCRON_TEST_TMP:-memory}" = memory ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then
    for fleetcron_stale in /dev/shm/fleetcron-tests-*; do
        [ -O "$fleetcron_stale" ] && [ -f "$fleetcron_stale/.owner" ] || continue
        kill -0 "$(cat "$fleetcron_stale/.owner")" 2>/dev/null || rm -rf "$fleetcron_stale"
    done
    fleetcron_test_tmp=$(mktemp -d /dev/shm/fleetcron-tests-XXXXXX)
    chmod 755 "$fleetcron_test_tmp"
    echo $$ > "$fleetcron_test_tmp/.owner"
    trap 'rm -rf "$fleetcron_test_tmp"' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    TMPDIR=$fleetcron_test_tmp
    export TMPDIR
    echo "temporary files: $TMPDIR (memory; FLEETCRON_TEST_TMP=disk for the usual TMPDIR)"
fi
