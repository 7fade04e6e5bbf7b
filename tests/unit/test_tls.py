"""A verifying TLS context (``fleetcron.tls``) is built once per CA file and again when
that file changes: building one reads the whole bundle (about 20 ms of CPU), and an LDAP
log-in binds two or three times. A kept context must never outlive the trust it was built
from."""

from __future__ import annotations

import os
import ssl
from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import NameOID

from fixtures.certificates import self_signed
from fleetcron.tls import verifying_context


def write_ca(path: Path, common_name: str) -> None:
    """A self-signed CA certificate named ``common_name`` in ``path``."""
    scratch = path.parent / f"{path.name}.parts"
    scratch.mkdir(exist_ok=True)
    cert, _ = self_signed(scratch, common_name)
    path.write_bytes(cert.read_bytes())


def trusted_names(ca_file: Path) -> set[str]:
    return names_of(verifying_context(str(ca_file)))


def names_of(context: ssl.SSLContext) -> set[str]:
    """The common names of the CAs ``context`` trusts."""
    return {
        str(attribute.value)
        for der in context.get_ca_certs(binary_form=True)
        for attribute in x509.load_der_x509_certificate(der).subject.get_attributes_for_oid(
            NameOID.COMMON_NAME
        )
    }


def test_one_context_per_ca_file_until_the_file_changes(tmp_path: Path) -> None:
    ca_file = tmp_path / "ca.pem"
    write_ca(ca_file, "first CA")
    first = verifying_context(str(ca_file))
    assert verifying_context(str(ca_file)) is first, "built again for the same file"
    assert trusted_names(ca_file) == {"first CA"}

    # The administrator replaces the CA (a new inode, as an editor or a deploy writes it).
    replacement = tmp_path / "ca.pem.new"
    write_ca(replacement, "second CA")
    os.replace(replacement, ca_file)
    assert verifying_context(str(ca_file)) is not first
    assert trusted_names(ca_file) == {"second CA"}

    # The check can fail: the kept context still trusts only the CA it was built from.
    assert names_of(first) == {"first CA"}


def test_a_ca_file_rewritten_in_place_is_read_again(tmp_path: Path) -> None:
    ca_file = tmp_path / "ca.pem"
    write_ca(ca_file, "first CA")
    first = verifying_context(str(ca_file))
    write_ca(ca_file, "second CA, a longer name")  # same inode, another size and time
    assert verifying_context(str(ca_file)) is not first
    assert trusted_names(ca_file) == {"second CA, a longer name"}


def test_the_system_bundle_is_kept_too() -> None:
    system = verifying_context()
    assert verifying_context() is system
    assert (system.verify_mode, system.check_hostname) == (ssl.CERT_REQUIRED, True)
