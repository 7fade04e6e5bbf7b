"""What a log-in through an LDAP directory costs this process, on SQLite: a real slapd on
loopback (the test fixture's, ``tests/fixtures/slapd.py``), StartTLS and LDAPS, the
reader's bind and search, the user's bind and the group search, the account provisioned
and a session opened (:func:`fleetcron.services.identity.form_login.form_login`). Two ways
to trust the directory: its own CA in ``ldap_ca_file``, and none there, as for a directory
whose certificate a public CA signed: then the system's bundle is what TLS checks against
(here the system's bundle with the fixture's CA appended, through ``SSL_CERT_FILE``).

Reported per log-in: CPU time (user + sys) of this process, the median of 5 rounds, and the
wall time (slapd's own CPU is not counted). Before/after comparisons run the same file
against an older tree: ``PYTHONPATH=<old tree>/src .venv/bin/python bench/ldap_login_bench.py``.

Run by hand: ``.venv/bin/python bench/ldap_login_bench.py [N]``.
"""

from __future__ import annotations

import functools
import os
import ssl
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from _common import loadavg, median, own_cpu, table, work_dir

ROUNDS = 5


def system_bundle_with(ca_file: Path, path: Path) -> Path:
    """The system's CA bundle with ``ca_file`` appended, written to ``path``."""
    defaults = ssl.get_default_verify_paths()
    system = Path(defaults.cafile or defaults.openssl_cafile)
    path.write_bytes(system.read_bytes() + b"\n" + ca_file.read_bytes())
    return path


def main(count: int) -> None:
    from _common import make_app
    from fixtures.slapd import PEOPLE, start_slapd, stop_slapd
    from fleetcron.services.identity.configs import LdapConfig
    from fleetcron.services.identity.form_login import form_login

    directory = work_dir("ldap-login")
    (directory / "slapd").mkdir()
    slapd = start_slapd(directory / "slapd")
    rows = []
    try:
        bundle = system_bundle_with(slapd.ca_file, directory / "bundle.pem")
        designs: tuple[tuple[str, str, dict[str, object]], ...] = (
            ("StartTLS, ldap_ca_file", slapd.starttls_url, {}),
            ("LDAPS, ldap_ca_file", slapd.ldaps_url, {}),
            ("StartTLS, the system bundle", slapd.starttls_url, {"ldap_ca_file": None}),
            ("LDAPS, the system bundle", slapd.ldaps_url, {"ldap_ca_file": None}),
        )
        for index, (label, url, extra) in enumerate(designs):
            if "ldap_ca_file" in extra:
                os.environ["SSL_CERT_FILE"] = str(bundle)
            data = directory / str(index)
            app = make_app(
                f"sqlite:///{data}.db",
                data,
                lambda: datetime.now(UTC),
                **slapd.settings(url, **extra),
            )
            config = LdapConfig.of(app.settings)
            assert config is not None
            password = PEOPLE["lena"][0]

            once = functools.partial(form_login, app, config, "lena", password, "127.0.0.1")

            for _ in range(5):
                once()
            cpu, wall = [], []
            for _ in range(ROUNDS):
                start, started = own_cpu(), time.perf_counter()
                for _ in range(count):
                    once()
                cpu.append((own_cpu() - start) / count * 1000)
                wall.append((time.perf_counter() - started) / count * 1000)
            rows.append((label, count, f"{median(cpu):.2f}", f"{median(wall):.2f}"))
            app.close()
    finally:
        stop_slapd(slapd)
    print(f"load average {loadavg()}")
    print(table(("directory", "log-ins per round", "CPU ms / log-in", "wall ms / log-in"), rows))


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 40)
