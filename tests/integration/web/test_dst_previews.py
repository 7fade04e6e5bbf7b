"""The schedule previews take a job's DST choices: ``GET /api/v1/cron/preview`` with
``dst_gap``/``dst_fold`` and the job form's preview. The fake clock starts on 2026-03-02;
Warsaw skips 02:00-03:00 on 2026-03-29 and repeats 02:00-03:00 on 2026-10-25."""

from __future__ import annotations

from fastapi.testclient import TestClient

from fleetcron.app import SYSTEM, App
from fleetcron.core.targets import TargetKind, TargetSpec
from fleetcron.services.targets import edit as targets
from integration.web.conftest import API, error_of, sqlite_only

Headers = dict[str, str]

GAP_DAY = "2026-03-29"


def preview(client: TestClient, headers: Headers, **params: str) -> dict[str, object]:
    response = client.get(
        f"{API}/cron/preview",
        params={"expr": "30 2 * * *", "tz": "Europe/Warsaw", "n": "40"} | params,
        headers=headers,
    )
    assert response.status_code == 200, response.text
    body: dict[str, object] = response.json()
    return body


def fires_on(body: dict[str, object], day: str) -> list[str]:
    fires = body["next"]
    assert isinstance(fires, list)
    return [str(f) for f in fires if str(f).startswith(day)]


@sqlite_only
def test_the_api_preview_follows_the_gap_choice(client: TestClient, as_viewer: Headers) -> None:
    default = preview(client, as_viewer)
    skipped = preview(client, as_viewer, dst_gap="skip")

    # Debian cron's rule runs a fixed time the jump skips right after it; skip does not.
    assert fires_on(default, GAP_DAY) == [f"{GAP_DAY}T03:00:00+02:00"]
    assert fires_on(skipped, GAP_DAY) == []
    assert default["dst"] == [
        f"Europe/Warsaw, {GAP_DAY}: 02:30 does not exist → runs at 03:00",
        "Europe/Warsaw, 2026-10-25: 02:30 happens twice → runs once, on the first pass (+02:00)",
    ]
    assert isinstance(skipped["dst"], list)
    assert skipped["dst"][0] == f"Europe/Warsaw, {GAP_DAY}: 02:30 does not exist → skipped"


@sqlite_only
def test_the_api_preview_follows_the_fold_choice(client: TestClient, as_viewer: Headers) -> None:
    both = preview(client, as_viewer, dst_fold="both")

    assert isinstance(both["dst"], list)
    assert both["dst"][1].endswith("→ runs on both passes (+02:00, +01:00)")
    # A zone without DST has nothing to say (the negative control).
    assert preview(client, as_viewer, tz="Asia/Tokyo", dst_fold="both")["dst"] == []


@sqlite_only
def test_a_bad_choice_is_refused_naming_the_field(client: TestClient, as_viewer: Headers) -> None:
    response = client.get(
        f"{API}/cron/preview",
        params={"expr": "30 2 * * *", "tz": "Europe/Warsaw", "dst_fold": "twice"},
        headers=as_viewer,
    )

    assert response.status_code == 422
    assert error_of(response)["field"] == "dst_fold"


@sqlite_only
def test_the_job_forms_preview_follows_the_jobs_choices(
    app: App, client: TestClient, as_operator: Headers, browser: TestClient
) -> None:
    targets.add_target(app, SYSTEM, TargetSpec("box", TargetKind.LOCAL))
    for name, gap in (("skips", "skip"), ("usual", "cronie")):
        made = client.post(
            f"{API}/jobs",
            json={
                "name": name,
                "schedule": "30 2 * * *",
                "timezone": "Europe/Warsaw",
                "command": f"echo {name}",
                "target": "box",
                "dst_gap": gap,
            },
            headers=as_operator,
        )
        assert made.status_code == 201, made.text

    skips = browser.get("/jobs/skips/edit")
    usual = browser.get("/jobs/usual/edit")

    assert skips.status_code == usual.status_code == 200
    assert f"Europe/Warsaw, {GAP_DAY}: 02:30 does not exist → skipped" in skips.text
    assert f"Europe/Warsaw, {GAP_DAY}: 02:30 does not exist → runs at 03:00" in usual.text
    assert 'data-dst-inputs="dst_gap dst_fold"' in usual.text


@sqlite_only
def test_the_target_zone_preview_follows_the_choices_too(
    app: App, client: TestClient, as_viewer: Headers
) -> None:
    targets.add_target(app, SYSTEM, TargetSpec("waw", TargetKind.LOCAL, timezone="Europe/Warsaw"))

    default = preview(client, as_viewer, tz="target")
    skipped = preview(client, as_viewer, tz="target", dst_gap="skip")

    assert fires_on(default, GAP_DAY) == [f"{GAP_DAY}T03:00:00+02:00"]
    assert fires_on(skipped, GAP_DAY) == []
