#!/usr/bin/env bash
# What the tests need beyond Node and npm, installed when missing (npm test runs this first, as `pretest`):
# Java 17 for DynamoDB Local (the AWS adapters' tests) and Chromium for the dashboard's browser tests.
# Installs with apt-get, as root or through sudo; where it cannot, it says so in one line and fails.
set -uo pipefail

have_chromium() {
  local path
  for path in "${FLOE_CHROMIUM:-}" /usr/bin/chromium /usr/bin/chromium-browser /usr/bin/google-chrome; do
    [ -n "$path" ] && [ -x "$path" ] && return 0
  done
  return 1
}

missing=()
command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jre-headless)
have_chromium || missing+=(chromium)
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; fi
fi
fail() {
  echo "the tests need ${missing[*]} (Java 17 for DynamoDB Local, Chromium for the dashboard tests), and $1; install them yourself, or set FLOE_CHROMIUM to a Chromium binary" >&2
  exit 1
}
command -v apt-get >/dev/null 2>&1 || fail "this machine has no apt-get"
[ "$(id -u)" -eq 0 ] || [ -n "$SUDO" ] || fail "installing them with apt-get needs root or sudo without a password"
echo "installing ${missing[*]} for the tests (apt-get)"
log=$(mktemp)
if ! { $SUDO apt-get update && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"; } >"$log" 2>&1; then
  tail -n 5 "$log" >&2
  rm -f "$log"
  fail "'apt-get install ${missing[*]}' failed (its last lines are above)"
fi
rm -f "$log"
