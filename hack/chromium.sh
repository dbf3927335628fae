#!/usr/bin/env bash
# Installs Debian's chromium package for the browser test when no
# Chromium is there ($STRATA_CHROMIUM, else /usr/bin/chromium).
set -euo pipefail
browser="${STRATA_CHROMIUM:-/usr/bin/chromium}"
if [[ -x "${browser}" ]]; then
  exit 0
fi
if [[ "$(id -u)" != 0 ]]; then
  echo "chromium: ${browser} is missing; install it (sudo apt-get install -y chromium) or set STRATA_CHROMIUM" >&2
  exit 1
fi
echo "[chromium] installing Debian's chromium package"
export DEBIAN_FRONTEND=noninteractive
apt-get install -y --no-install-recommends chromium >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y --no-install-recommends chromium; }
"${browser}" --version
