#!/usr/bin/env bash
# Browser tests need a real headless Chromium. Installs Debian's package when
# missing; a machine where that is impossible fails here, never skips.
set -euo pipefail
for b in chromium chromium-browser google-chrome; do
  if command -v "$b" >/dev/null 2>&1; then exit 0; fi
done
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "Chromium missing: installing Debian's chromium package" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
  exit 0
fi
echo "Chromium not found and cannot be installed here (need root + apt-get)." >&2
echo "Install chromium, then run make test again." >&2
exit 1
