"""The Prometheus alert rules in deploy/prometheus/ are valid, behave as their unit tests
say, and are written on metrics fleetcron exports: ``promtool check rules`` and
``promtool test rules`` accept them, every metric they name is in the exposition of the
metrics module, and every incident cause has a rule.

promtool comes with Debian's ``prometheus`` package (scripts/system-deps.sh installs it)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from fleetcron.core.incidents import CAUSES
from fleetcron.metrics import IncidentReading, IncidentsReading, Metrics, StateReading

RULES_DIR = Path(__file__).resolve().parents[2] / "deploy" / "prometheus"
RULES = RULES_DIR / "fleetcron-alerts.yml"
RULE_TESTS = RULES_DIR / "fleetcron-alerts.test.yml"


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool is not installed: run scripts/system-deps.sh")
    return found


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool(), *map(str, args)], capture_output=True, text=True, check=False, timeout=60
    )


def test_promtool_accepts_the_rules() -> None:
    result = run("check", "rules", RULES)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 7 rules found" in result.stdout


def test_promtool_refuses_a_broken_rule(tmp_path: Path) -> None:
    # Negative control of the check above: a rule whose expression does not parse.
    broken = tmp_path / "broken.yml"
    broken.write_text(RULES.read_text().replace("> 0\n", "> > 0\n", 1))
    result = run("check", "rules", broken)
    assert result.returncode != 0
    assert "parse error" in (result.stdout + result.stderr)


def test_the_rules_pass_their_unit_tests() -> None:
    result = run("test", "rules", RULE_TESTS)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_the_unit_tests_fail_when_a_rule_does_not_do_what_they_expect(tmp_path: Path) -> None:
    # Negative control: the failing rule made to wait 5 minutes; the test expects it at 2.
    (tmp_path / "fleetcron-alerts.yml").write_text(
        RULES.read_text().replace("for: 1m", "for: 5m", 1)
    )
    tests = tmp_path / "fleetcron-alerts.test.yml"
    tests.write_text(RULE_TESTS.read_text())
    result = run("test", "rules", tests)
    assert result.returncode != 0
    assert "FleetcronJobFailing" in result.stdout + result.stderr


def test_a_silence_of_one_project_fails_the_tests_when_the_rules_ignore_projects(
    tmp_path: Path,
) -> None:
    # Negative control of the two projects' case: matched on the job's name alone, team-a's
    # silence would mute team-b's backup as well, and the expected alert would not fire.
    rules = RULES.read_text()
    assert "on (project, fleetcron_job, cause)" in rules
    (tmp_path / "fleetcron-alerts.yml").write_text(
        rules.replace("on (project, fleetcron_job, cause)", "on (fleetcron_job, cause)")
    )
    tests = tmp_path / "fleetcron-alerts.test.yml"
    tests.write_text(RULE_TESTS.read_text())
    result = run("test", "rules", tests)
    assert result.returncode != 0
    assert "team-b" in result.stdout + result.stderr


def exposition() -> str:
    metrics = Metrics()
    metrics.watch_state(lambda: StateReading(0, 0, "standalone", 0))
    metrics.watch_incidents(
        lambda: IncidentsReading(
            CAUSES,
            [
                IncidentReading(
                    "backup", "failing", 50, acknowledged=False, silenced=True, project="team-a"
                ),
                IncidentReading(
                    "backup", "failing", 3, acknowledged=False, silenced=False, project="team-b"
                ),
            ],
        )
    )
    return metrics.exposition().decode()


def named_in_rules() -> set[str]:
    return set(re.findall(r"\b(fleetcron_[a-z_]+)\b", RULES.read_text()))


def test_every_metric_the_rules_name_is_exported() -> None:
    exported = set(re.findall(r"^(fleetcron_[a-z_]+)[{ ]", exposition(), re.MULTILINE))
    named = named_in_rules() - {"fleetcron_job", "fleetcron_target"}  # labels, not metrics
    assert named, "the rules name no fleetcron metric"
    assert named <= exported, named - exported
    # Negative control: a name the module does not export is caught.
    assert not {"fleetcron_incidents_opened"} <= exported


def test_the_incident_gauges_say_what_they_were_given() -> None:
    text = exposition()
    labels = 'cause="failing",fleetcron_job="backup",fleetcron_target=""'
    team_a, team_b = f'{labels},project="team-a"', f'{labels},project="team-b"'
    # Two projects' jobs named backup are two series, each with its own numbers.
    assert f"fleetcron_incident_targets{{{team_a}}} 50.0" in text
    assert f"fleetcron_incident_silenced{{{team_a}}} 1.0" in text
    assert f"fleetcron_incident_targets{{{team_b}}} 3.0" in text
    assert f"fleetcron_incident_silenced{{{team_b}}} 0.0" in text
    # Negative control: without the label they would be one series, said twice.
    assert f"fleetcron_incident_targets{{{labels}}}" not in text
    assert 'fleetcron_incidents_open{cause="failing"} 2.0' in text
    assert 'fleetcron_incidents_open{cause="late"} 0.0' in text
    assert 'fleetcron_incidents_silenced{cause="failing"} 1.0' in text
    assert 'fleetcron_incidents_acknowledged{cause="failing"} 0.0' in text


def test_every_incident_cause_has_a_rule() -> None:
    text = RULES.read_text()
    for cause in CAUSES:
        assert f'cause="{cause}"' in text, cause
