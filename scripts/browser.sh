#!/usr/bin/env bash
# Make a headless browser available for the browser tests (tests/browser/):
# Debian's chromium and its matching chromedriver, installed with apt-get when
# missing (the machine has apt but not a browser; nothing is downloaded from
# anywhere else). Prints the two paths; exits non-zero when they cannot be had.
# Safe to run repeatedly and concurrently (apt's own lock serialises installs).
set -euo pipefail

find_bins() {
  CHROMIUM="$(command -v chromium || command -v chromium-browser || true)"
  DRIVER="$(command -v chromedriver || true)"
  [ -z "$DRIVER" ] && [ -x /usr/bin/chromedriver ] && DRIVER=/usr/bin/chromedriver
  [ -n "$CHROMIUM" ] && [ -n "$DRIVER" ]
}

if ! find_bins; then
  if ! command -v apt-get >/dev/null; then
    echo "scripts/browser.sh: no chromium/chromedriver and no apt-get to install them" >&2
    exit 1
  fi
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  echo "scripts/browser.sh: installing chromium and chromium-driver (apt-get)" >&2
  if ! $SUDO apt-get install -y -q --no-install-recommends chromium chromium-driver >&2; then
    $SUDO apt-get update -q >&2
    $SUDO apt-get install -y -q --no-install-recommends chromium chromium-driver >&2
  fi
  find_bins || { echo "scripts/browser.sh: install finished but binaries not found" >&2; exit 1; }
fi
echo "chromium: $CHROMIUM"
echo "chromedriver: $DRIVER"
