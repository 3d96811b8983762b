#!/usr/bin/env bash
# Make sure a Chromium is installed for the trajectory viewer's browser test
# (evaluation/tests/test_viewer.py). Idempotent: if $CHROMIUM, chromium, chromium-browser or
# google-chrome is on PATH, do nothing. Otherwise, as root on Debian: install Debian's
# `chromium` package (about 40 s and ~300 MB with its libraries on a fresh bookworm machine).
# Playwright drives that binary by its path (`executable_path`), so no browser is downloaded
# from anywhere but the distribution's archive. Anything else: say what to do and exit 1.
set -euo pipefail

found() {
  local name
  for name in "${CHROMIUM:-}" chromium chromium-browser google-chrome; do
    if [ -n "$name" ] && command -v "$name" >/dev/null 2>&1; then
      command -v "$name"
      return 0
    fi
  done
  return 1
}

# The version check also proves the binary starts (its shared libraries are all there).
version() { "$1" --headless --version 2>/dev/null | head -n 1; }

if exe=$(found) && [ -n "$(version "$exe")" ]; then
  echo "chromium: $(version "$exe") ($exe)"
  exit 0
fi

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  cat >&2 <<MSG
chromium: none found, and this script can only install one as root on Debian.
Do one of:
  - install Chromium or Chrome with your package manager (Debian: 'sudo apt-get install chromium');
  - or point CHROMIUM at a Chromium/Chrome binary you already have (CHROMIUM=/path/to/chrome).
MSG
  exit 1
fi

echo "chromium: installing Debian's chromium package"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium >/dev/null
exe=$(found)
echo "chromium: $(version "$exe") ($exe)"
