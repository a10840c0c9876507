#!/usr/bin/env bash
# Makes sure COMMAND is installed, from Debian package PACKAGE if it is not.
# A service the package ships is not left running.
#
#   hack/ensure-apt.sh COMMAND PACKAGE
set -euo pipefail
cmd=${1:?command} pkg=${2:?package}
if command -v "$cmd" >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "$cmd is not installed and there is no apt-get: install $pkg" >&2
  exit 1
fi
echo "installing Debian's $pkg package (first time only)" >&2
sudo=""
[[ $(id -u) -ne 0 ]] && sudo=sudo
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "$pkg" >/dev/null
$sudo systemctl stop "$pkg" 2>/dev/null || $sudo service "$pkg" stop 2>/dev/null || true
command -v "$cmd" >/dev/null
