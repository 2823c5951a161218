#!/usr/bin/env bash
# Installs Debian's Chromium and its chromedriver for the dashboard's browser test, when this
# machine can: as root with apt. Otherwise says why; that test then skips and says so.
set -u
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "chromium/chromedriver not installed (needs root and apt); the dashboard browser test will skip" >&2
  exit 0
fi
echo "installing Debian's chromium and chromium-driver for the dashboard browser test" >&2
(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver) >/dev/null 2>&1 \
  || echo "apt-get install chromium chromium-driver failed; the dashboard browser test will skip" >&2
