"""A run's page and its Stop button take the run ids the API takes: one beyond them is
refused naming ``run_id`` and the range (it reached the database and came back as the
generic "a number or a date in the request is out of range"). SQLite and PostgreSQL."""

from __future__ import annotations

from fastapi.testclient import TestClient

from integration.web.conftest import csrf_token_of

BEYOND = 2**31


def test_a_run_page_beyond_the_id_range_names_the_field_and_the_range(
    browser: TestClient,
) -> None:
    page = browser.get(f"/runs/{BEYOND}")

    assert page.status_code == 422
    assert "run_id: Input should be less than or equal to 2147483647" in page.text


def test_a_stop_beyond_the_id_range_names_the_field_and_the_range(browser: TestClient) -> None:
    refused = browser.post(f"/runs/{BEYOND}/stop", data={"csrf_token": csrf_token_of(browser)})

    assert refused.status_code == 422
    assert "run_id: Input should be less than or equal to 2147483647" in refused.text


def test_the_largest_run_id_is_looked_up(browser: TestClient) -> None:
    # Negative control: the bound lets the API's largest id through to the lookup.
    page = browser.get(f"/runs/{BEYOND - 1}")

    assert page.status_code == 404
    assert f"run {BEYOND - 1} does not exist" in page.text
