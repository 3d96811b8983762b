#!/usr/bin/env bash
# Make sure a Docker engine answers. Idempotent: if `docker info` works, do nothing.
# Otherwise, as root on Debian/Ubuntu: install docker.io (and debootstrap, which the base
# images need), start dockerd in the background (no systemd assumed) and wait until it answers.
# Anything else: say exactly what the user must do and exit 1.
set -euo pipefail

WAIT_S=${DOCKER_WAIT_S:-60}
LOG=${DOCKERD_LOG:-/var/log/deepswe-dockerd.log}

answers() { docker info >/dev/null 2>&1; }

if command -v docker >/dev/null 2>&1 && answers; then
  echo "docker engine: running ($(docker version --format '{{.Server.Version}}' 2>/dev/null))"
  exit 0
fi

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  cat >&2 <<MSG
docker engine: not reachable, and this script can only install one as root on Debian/Ubuntu.
Do one of:
  - start your Docker engine (e.g. 'sudo systemctl start docker'), and make sure this user may use it
    ('sudo usermod -aG docker \$USER', then log in again);
  - or run 'sudo make setup' on Debian/Ubuntu so docker.io can be installed and started.
MSG
  exit 1
fi

if ! command -v dockerd >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1; then
  echo "docker engine: installing docker.io and debootstrap from Debian packages"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq docker.io debootstrap >/dev/null
fi

if ! pgrep -x dockerd >/dev/null 2>&1; then
  echo "docker engine: starting dockerd in the background (log: $LOG)"
  # setsid: the engine must outlive the make/CI shell that started it.
  setsid nohup dockerd >"$LOG" 2>&1 </dev/null &
fi

for _ in $(seq "$WAIT_S"); do
  if answers; then
    echo "docker engine: running ($(docker version --format '{{.Server.Version}}'))"
    exit 0
  fi
  sleep 1
done
echo "docker engine: dockerd did not answer within ${WAIT_S}s; last lines of $LOG:" >&2
tail -n 20 "$LOG" >&2 || true
exit 1
