#!/usr/bin/env bash
# Makes sure a Prometheus server is installed (Debian's package), for the
# end-to-end alert test. Its service is not started: the test runs its own.
set -euo pipefail
if command -v prometheus >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "prometheus is not installed and there is no apt-get: install a Prometheus server" >&2
  exit 1
fi
echo "installing Debian's prometheus package (first time only)" >&2
sudo=""
[[ $(id -u) -ne 0 ]] && sudo=sudo
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends prometheus >/dev/null
# The package's service must not run beside the test's own server.
$sudo systemctl stop prometheus 2>/dev/null || $sudo service prometheus stop 2>/dev/null || true
command -v prometheus
