#!/usr/bin/env bash
# Installs the references the differential tests compare against, when this machine can (as root
# with apt): Debian's nats-server, and Go with Debian's nats.go (the library the nats CLI is built
# on) for the tests that run a Go client against both servers. Otherwise says why; those tests then
# skip visibly.
set -u
need=()
command -v nats-server >/dev/null 2>&1 || need+=(nats-server)
command -v go >/dev/null 2>&1 || need+=(golang-go)
[ -d /usr/share/gocode/src/github.com/nats-io/nats.go ] || need+=(golang-github-nats-io-go-nats-dev)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "not installed: ${need[*]} (needs root and apt); the tests that use them will skip" >&2
  exit 0
fi
echo "installing ${need[*]} for the differential tests" >&2
(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}") >/dev/null 2>&1 \
  || echo "apt-get install ${need[*]} failed; the tests that use them will skip" >&2
