#!/usr/bin/env bash
# Install the system packages the test suite needs, only when they are missing:
# OpenSSH server (real sshd targets), PostgreSQL server binaries (real database
# tests), Chromium's headless shell (browser tests), faketime, systemd-analyze (the
# checks of the service units in deploy/), promtool from prometheus (the checks of the
# alert rules in deploy/prometheus/), OpenLDAP's slapd and its client tools (the LDAP
# log-in's tests), Node.js and npm (the OIDC provider of the single sign-on tests),
# and Python's venv module with ensurepip (`make run`, and the virtualenv
# of the wheel install test). Safe to run repeatedly.
set -euo pipefail

need=()
command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || need+=(openssh-server)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
[ -x /usr/bin/chromium-headless-shell ] || need+=(chromium-headless-shell)
command -v faketime >/dev/null 2>&1 || need+=(faketime)
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
command -v promtool >/dev/null 2>&1 || need+=(prometheus)
[ -x /usr/sbin/slapd ] || need+=(slapd)
command -v ldapsearch >/dev/null 2>&1 || need+=(ldap-utils)
# Node.js and npm run the OIDC provider of the single sign-on tests (tests/fixtures/oidc/).
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
if command -v python3 >/dev/null 2>&1 && [ "$(command -v python3)" = /usr/bin/python3 ]; then
  python3 -c "import ensurepip, venv" >/dev/null 2>&1 || need+=(python3-venv)
fi

if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
    echo "missing system packages: ${need[*]} (run as root or install them)" >&2
    exit 1
  fi
else
  SUDO=
fi

echo "installing system packages: ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
