"""``webhook_refuse_private`` sees through IPv6 forms that carry a private IPv4 address
(NAT64, 6to4, IPv4-compatible, IPv4-mapped) and refuses site-local, local-use NAT64 and
Teredo addresses; public addresses in the same forms pass (negative controls)."""

from __future__ import annotations

import ipaddress

import pytest

from fleetcron.core.addresses import embedded_ipv4, private_reason
from fleetcron.notify import DeliveryFailed
from fleetcron.notify.webhook import refuse_private_destination

REFUSED = [
    # the forms of the audit, and their metadata-service twins
    "http://[64:ff9b::7f00:1]:22990/n",  # NAT64 of 127.0.0.1
    "http://[64:ff9b::a9fe:a9fe]/latest/meta-data/",  # NAT64 of 169.254.169.254
    "http://[64:ff9b::10.1.2.3]/",  # NAT64, dotted
    "http://[64:ff9b:1::7f00:1]/",  # local-use NAT64 prefix
    "http://[64:ff9b:1:7f00:1::]/",
    "http://[2002:7f00:1::]/",  # 6to4 of 127.0.0.1
    "http://[2002:a9fe:a9fe::]/",  # 6to4 of 169.254.169.254
    "http://[2002:c0a8:101::1]/",  # 6to4 of 192.168.1.1
    "http://[::127.0.0.1]/",  # IPv4-compatible
    "http://[::a9fe:a9fe]/",
    "http://[::10.0.0.1]/",
    "http://[fec0::1]/",  # site-local
    "http://[fec0:1234::5]/",
    "http://[feff::1]/",
    "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/",  # Teredo
    # still refused, as before
    "http://[::ffff:127.0.0.1]/",
    "http://[0:0:0:0:0:ffff:7f00:1]/",
    "http://[::1]/",
    "http://127.0.0.1/",
    "http://0.0.0.0/",
    "http://169.254.169.254/",
]

PUBLIC = [
    "https://93.184.216.34/hook",
    "https://[64:ff9b::808:808]/hook",  # NAT64 of 8.8.8.8: how an IPv6-only host reaches it
    "https://[2002:808:808::1]/hook",  # 6to4 of 8.8.8.8
    "https://[2606:4700:4700::1111]/hook",
]


@pytest.mark.parametrize("url", REFUSED)
def test_private_addresses_in_every_ipv6_form_are_refused(url: str) -> None:
    with pytest.raises(DeliveryFailed, match="webhook_refuse_private is on"):
        refuse_private_destination(url)


@pytest.mark.parametrize("url", PUBLIC)
def test_public_addresses_in_the_same_forms_pass(url: str) -> None:
    """Negative control: the check refuses by what the address reaches, not by its form."""
    refuse_private_destination(url)


@pytest.mark.parametrize(
    ("address", "inner"),
    [
        ("64:ff9b::7f00:1", "127.0.0.1"),
        ("2002:a9fe:a9fe::", "169.254.169.254"),
        ("::127.0.0.1", "127.0.0.1"),
        ("::ffff:10.0.0.1", "10.0.0.1"),
        ("::1", None),
        ("::", None),
        ("2606:4700:4700::1111", None),
        ("127.0.0.1", None),
    ],
)
def test_the_embedded_ipv4_address_is_found(address: str, inner: str | None) -> None:
    found = embedded_ipv4(ipaddress.ip_address(address))

    assert (str(found) if found else None) == inner


def test_the_reason_names_the_address_inside() -> None:
    reason = private_reason(ipaddress.ip_address("64:ff9b::a9fe:a9fe"))

    assert reason is not None and "169.254.169.254" in reason
    assert private_reason(ipaddress.ip_address("fec0::1")) == "a site-local address"
