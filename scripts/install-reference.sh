#!/usr/bin/env bash
# Installs Debian's nats-server (the reference the differential tests compare against) when this
# machine can: as root with apt. Otherwise says why; the differential tests then skip visibly.
set -u
if command -v nats-server >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "reference nats-server not installed (needs root and apt); differential tests will skip" >&2
  exit 0
fi
echo "installing Debian's nats-server for the differential tests" >&2
(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nats-server) >/dev/null 2>&1 \
  || echo "apt-get install nats-server failed; differential tests will skip" >&2
