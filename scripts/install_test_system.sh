#!/usr/bin/env bash
# What the tests need from the system: Debian's Chromium for the browser test, bubblewrap for
# the local sandbox (slirp4netns for its outbound network), tmux for the terminal tests, git,
# redis-server and haproxy for the scale-out tests (which start their own
# instances; the services apt may start are stopped), and a Docker engine (docker.io, started here when it is not running) for
# the Docker sandbox. Installed only when missing and when this user may run apt-get; every
# step is optional: when one is impossible, a note is printed and the tests that need it skip.
set -u

DOCKERD_LOG=/tmp/dockerd.log
DOCKERD_WAIT_SECONDS=40

if [ "$(id -u)" -eq 0 ]; then sudo=""; elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo="sudo -n"; else
  sudo="unavailable"
fi

install_packages() {
  local need=()
  command -v chromium >/dev/null 2>&1 || need+=(chromium)
  command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
  command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
  command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
  command -v haproxy >/dev/null 2>&1 || need+=(haproxy)
  command -v slirp4netns >/dev/null 2>&1 || need+=(slirp4netns)
  command -v tmux >/dev/null 2>&1 || need+=(tmux)
  command -v git >/dev/null 2>&1 || need+=(git)
  [ ${#need[@]} -eq 0 ] && return 0
  if [ "$sudo" = "unavailable" ]; then
    echo "note: ${need[*]} missing and apt-get is not allowed here; the tests that need them will skip"
    return 0
  fi
  if ! command -v apt-get >/dev/null; then
    echo "note: ${need[*]} missing and this is not a Debian-like system; the tests that need them will skip"
    return 0
  fi
  echo "installing ${need[*]} from Debian's packages"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq >/dev/null || echo "note: apt-get update failed; trying the install anyway"
  $sudo apt-get install -y -qq "${need[@]}" >/dev/null && { stop_services; return 0; }
  # One package may be unavailable: install the others one by one.
  for package in "${need[@]}"; do
    $sudo apt-get install -y -qq "$package" >/dev/null \
      || echo "note: could not install $package; the tests that need it will skip"
  done
  stop_services
}

stop_services() {
  # The scale-out tests start their own redis-server and haproxy on free loopback ports.
  for service in redis-server haproxy; do
    command -v service >/dev/null && $sudo service "$service" stop >/dev/null 2>&1
  done
  return 0
}

engine_answers() {
  command -v docker >/dev/null && timeout 10 docker info >/dev/null 2>&1
}

start_dockerd() {
  engine_answers && return 0
  if ! command -v dockerd >/dev/null; then
    echo "note: no Docker engine (dockerd) here; the Docker sandbox tests will skip"
    return 0
  fi
  if [ "$(id -u)" -ne 0 ]; then
    echo "note: the Docker engine is not running and only root starts it here; the Docker sandbox tests will skip"
    return 0
  fi
  echo "starting dockerd in the background (log: $DOCKERD_LOG)"
  setsid dockerd >"$DOCKERD_LOG" 2>&1 < /dev/null &
  local waited=0
  until engine_answers; do
    if [ "$waited" -ge "$DOCKERD_WAIT_SECONDS" ]; then
      echo "note: dockerd did not answer within ${DOCKERD_WAIT_SECONDS} s (see $DOCKERD_LOG); the Docker sandbox tests will skip"
      return 0
    fi
    sleep 1
    waited=$((waited + 1))
  done
  echo "dockerd is up"
}

install_packages
start_dockerd
exit 0
