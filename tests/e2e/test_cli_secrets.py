"""Secrets given to the CLI or in its settings are never shown in clear: ``config show``
masks every libpq password key, the replication peer's connection string is a secret
setting (from a file too), and a secret given on the command line still works, with a
warning pointing to where it belongs."""

from __future__ import annotations

import json
from pathlib import Path

from e2e.conftest import Result, Zygote
from e2e.test_cli_passwords import fleetcron

PEER_DSN = "host=10.0.0.6 user=repl password=PEER-DSN-SECRET dbname=fleetcron"
DB_URL = "postgresql+psycopg://fc:DBURL-SECRET@127.0.0.1:1/fc?sslpassword=SSLPW-SECRET"
SECRETS = ("PEER-DSN-SECRET", "DBURL-SECRET", "SSLPW-SECRET")
WARNING = "puts a secret on the command line"


def shown(result: Result) -> dict[str, str]:
    assert result.returncode == 0, result.stderr
    return {line["name"]: line["value"] for line in json.loads(result.stdout)["settings"]}


def test_config_show_masks_the_peer_dsn_and_every_password_of_the_database_url(
    tmp_path: Path, zygote: Zygote
) -> None:
    env = {"FLEETCRON_REPLICATION_PEER_DSN": PEER_DSN, "FLEETCRON_DATABASE_URL": DB_URL}
    table = zygote.run("config", "show", workdir=tmp_path, env=env)
    values = shown(zygote.run("config", "show", "--json", workdir=tmp_path, env=env))

    assert table.returncode == 0, table.stderr
    for output in (table.stdout, json.dumps(values)):
        assert not [s for s in SECRETS if s in output], output
    assert values["replication_peer_dsn"] == (
        "host=10.0.0.6 user=repl password=********** dbname=fleetcron"
    )
    assert values["database_url"].startswith("postgresql+psycopg://fc:**********@127.0.0.1:1/fc")
    assert "sslpassword=**********" in values["database_url"]


def test_config_show_shows_a_connection_string_without_a_password(
    tmp_path: Path, zygote: Zygote
) -> None:
    """Negative control: the check above reads the shown values; what is no secret is there."""
    env = {"FLEETCRON_REPLICATION_PEER_DSN": "host=10.0.0.6 user=repl dbname=PLAIN-NAME"}
    values = shown(zygote.run("config", "show", "--json", workdir=tmp_path, env=env))
    assert values["replication_peer_dsn"] == "host=10.0.0.6 user=repl dbname=PLAIN-NAME"


def test_the_peer_dsn_is_read_from_its_file(tmp_path: Path, zygote: Zygote) -> None:
    secret = tmp_path / "peer.dsn"
    secret.write_text(PEER_DSN + "\n")
    env = {"FLEETCRON_REPLICATION_PEER_DSN_FILE": str(secret)}
    values = shown(zygote.run("config", "show", "--json", workdir=tmp_path, env=env))
    missing = zygote.run(
        "config",
        "show",
        workdir=tmp_path,
        env={"FLEETCRON_REPLICATION_PEER_DSN_FILE": str(tmp_path / "absent")},
    )

    assert values["replication_peer_dsn"].startswith("host=10.0.0.6 user=repl password=***")
    assert missing.returncode == 1  # a configuration error, as for every *_FILE
    assert "FLEETCRON_REPLICATION_PEER_DSN_FILE: cannot read" in missing.stderr


def initialized(zygote: Zygote, tmp_path: Path) -> None:
    result = fleetcron(zygote, tmp_path, "init")
    assert result.returncode == 0, result.stderr


def test_a_webhook_secret_on_the_command_line_works_with_a_warning(
    tmp_path: Path, zygote: Zygote
) -> None:
    initialized(zygote, tmp_path)
    key = tmp_path / "key"
    key.write_text("signing-key-from-a-file\n")
    warned = fleetcron(
        zygote, tmp_path, "notify", "channel", "add", "a", "--url", "https://h.example/x",
        "--secret", "signing-key-on-the-line",
    )  # fmt: skip
    from_file = fleetcron(
        zygote, tmp_path, "notify", "channel", "add", "b", "--url", "https://h.example/y",
        "--secret-file", str(key),
    )  # fmt: skip
    from_stdin = fleetcron(
        zygote, tmp_path, "notify", "channel", "add", "c", "--url", "https://h.example/z",
        "--secret-file", "-", stdin="signing-key-from-stdin\n",
    )  # fmt: skip
    listed = fleetcron(zygote, tmp_path, "notify", "channel", "list", "--json")

    assert warned.returncode == 0, warned.stderr
    assert WARNING in warned.stderr and "--secret-file FILE" in warned.stderr
    # Negative controls: the same command with the secret from a file or stdin is not warned.
    for quiet in (from_file, from_stdin):
        assert quiet.returncode == 0, quiet.stderr
        assert WARNING not in quiet.stderr
    channels = {c["name"]: c["has_secret"] for c in json.loads(listed.stdout)}
    assert channels == {"a": True, "b": True, "c": True}


def test_an_smtp_password_on_the_command_line_is_warned_about(
    tmp_path: Path, zygote: Zygote
) -> None:
    initialized(zygote, tmp_path)
    smtp = ("--smtp-host", "mail", "--starttls", "--from", "a@x.example", "--to", "b@x.example")
    warned = fleetcron(
        zygote, tmp_path, "notify", "channel", "add", "m", *smtp, "--username", "u",
        "--password", "smtp-pass-on-line",
    )  # fmt: skip
    quiet = fleetcron(
        zygote, tmp_path, "notify", "channel", "add", "n", *smtp, "--username", "u",
        "--password-file", "-", stdin="smtp-pass-on-stdin\n",
    )  # fmt: skip

    assert warned.returncode == 0, warned.stderr
    assert WARNING in warned.stderr and "--password-file FILE" in warned.stderr
    assert quiet.returncode == 0, quiet.stderr
    assert WARNING not in quiet.stderr


def test_replication_setup_warns_of_a_password_on_the_command_line(
    tmp_path: Path, zygote: Zygote
) -> None:
    """The warning comes before any connection, so a SQLite install shows it (and then
    refuses: replication is for the replicated pair)."""
    with_password = "postgresql+psycopg://fc:REPL-URL-SECRET@127.0.0.1:1/fc"
    run = zygote.run
    warned = run("cluster", "replication", "setup", "--peer-database-url", with_password,
                 workdir=tmp_path)  # fmt: skip
    conninfo = run("cluster", "replication", "setup", "--peer-database-url",
                   "postgresql+psycopg://fc@127.0.0.1:1/fc", "--this-conninfo",
                   "host=a password=THIS-SECRET", workdir=tmp_path)  # fmt: skip
    quiet = run("cluster", "replication", "setup", "--peer-database-url",
                "postgresql+psycopg://fc@127.0.0.1:1/fc", workdir=tmp_path)  # fmt: skip
    missing = run("cluster", "replication", "setup", workdir=tmp_path)

    assert WARNING in warned.stderr and "--peer-database-url-file FILE" in warned.stderr
    assert "REPL-URL-SECRET" not in warned.stdout + warned.stderr.replace(WARNING, "")
    assert "--this-conninfo puts a secret" in conninfo.stderr
    assert "THIS-SECRET" not in conninfo.stderr
    # Negative control: a URL without a password (~/.pgpass holds it) is not warned about.
    assert quiet.returncode != 0 and WARNING not in quiet.stderr
    assert missing.returncode == 2
    assert "peer_database_url: required" in missing.stderr
