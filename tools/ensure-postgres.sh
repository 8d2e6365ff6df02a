#!/usr/bin/env bash
# Makes sure PostgreSQL server binaries exist for the embedded cluster
# (initdb, pg_ctl). Installs Debian's package when we can; otherwise says what
# to install. A DATABASE_URL pointing elsewhere does not need them.
set -euo pipefail
if [ -n "${JEJAK_PG_BIN:-}" ] && [ -x "$JEJAK_PG_BIN/initdb" ]; then exit 0; fi
if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "PostgreSQL binaries missing: installing Debian's postgresql package" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql >/dev/null
  exit 0
fi
echo "PostgreSQL server binaries (initdb, pg_ctl) not found." >&2
echo "Install them (Debian/Ubuntu: sudo apt-get install postgresql), set JEJAK_PG_BIN," >&2
echo "or set DATABASE_URL to an existing PostgreSQL 15+ server." >&2
exit 1
