"""Every password in a connection string is masked wherever it is shown: the one masking
function (:func:`fleetcron.masking.mask_dsn`) for URLs and libpq ``key=value`` strings."""

from __future__ import annotations

import pytest

from fleetcron.config_view import mask_url
from fleetcron.masking import MASK, holds_secret, mask_dsn

SECRETS = ("PW-ONE", "PW-TWO")


@pytest.mark.parametrize(
    ("dsn", "kept"),
    [
        ("postgresql+psycopg://fc:PW-ONE@127.0.0.1:1/fc?sslpassword=PW-TWO", "127.0.0.1"),
        ("postgresql://fc@db/fc?password=PW-ONE&SSLPASSWORD=PW-TWO&sslmode=require", "sslmode"),
        ("host=10.0.0.6 user=repl password=PW-ONE sslpassword=PW-TWO dbname=fc", "10.0.0.6"),
        ("host=db password = 'PW-ONE with \\' quote' sslpassword=PW-TWO", "host=db"),
        ("host=db   sslkey=/k.pem sslpassword=PW-TWO password=PW-ONE", "/k.pem"),
    ],
)
def test_every_libpq_password_key_is_masked_and_the_rest_is_kept(dsn: str, kept: str) -> None:
    shown = mask_dsn(dsn)
    assert not [secret for secret in SECRETS if secret in shown], shown
    assert kept in shown and MASK in shown
    assert holds_secret(dsn)


@pytest.mark.parametrize(
    "dsn", ["host=db user=repl dbname=fc", "postgresql+psycopg://fc@db/fc", "sqlite:////d/f.db"]
)
def test_a_string_without_a_password_is_shown_unchanged(dsn: str) -> None:
    """Negative control: the masking does not hide what is no secret (the check above
    would pass for a function that masks everything)."""
    assert mask_dsn(dsn) == dsn
    assert not holds_secret(dsn)


@pytest.mark.parametrize(
    "text", ["not a dsn PW-ONE", "host='PW-ONE", "postgresql://u:PW-ONE@h1:5432,h2:5433/db"]
)
def test_what_cannot_be_parsed_is_masked_whole(text: str) -> None:
    assert mask_dsn(text) == MASK


def test_config_view_shows_urls_through_the_same_function() -> None:
    assert mask_url is mask_dsn
