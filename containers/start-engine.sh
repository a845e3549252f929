#!/usr/bin/env bash
# Start a Docker engine if none answers (idempotent): install docker.io if missing, run dockerd in the
# background with its log in a file, and wait until `docker info` works. Exit 1 with the log's tail if not.
set -euo pipefail
LOG=${DOCKERD_LOG:-/var/log/dockerd.log}

docker info >/dev/null 2>&1 && exit 0

if ! command -v dockerd >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq docker.io >/dev/null
fi
# A stale pid file from a killed engine makes a new dockerd refuse to start.
if [ -f /var/run/docker.pid ] && ! kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
  rm -f /var/run/docker.pid
fi
if ! pgrep -x dockerd >/dev/null 2>&1; then
  # setsid: the engine must outlive this script and not share CI's process group (a CI timeout kills that).
  setsid dockerd >>"$LOG" 2>&1 </dev/null &
fi
for _ in $(seq 120); do
  docker info >/dev/null 2>&1 && exit 0
  sleep 0.5
done
echo "start-engine: dockerd did not answer within 60 s; last lines of $LOG:" >&2
tail -n 20 "$LOG" >&2 || true
exit 1
