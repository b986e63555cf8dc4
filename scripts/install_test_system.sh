#!/usr/bin/env bash
# What the tests need from the system: Debian's Chromium for the browser test.
# Installed only when missing and when this user may run apt-get; otherwise those tests skip.
set -u

need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)

[ ${#need[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then sudo=""; elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo="sudo -n"; else
  echo "note: ${need[*]} missing and apt-get is not allowed here; the tests that need them will skip"
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "note: ${need[*]} missing and this is not a Debian-like system; the tests that need them will skip"
  exit 0
fi
echo "installing ${need[*]} from Debian's packages"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null && $sudo apt-get install -y -qq "${need[@]}" >/dev/null \
  || echo "note: could not install ${need[*]}; the tests that need them will skip"
exit 0
