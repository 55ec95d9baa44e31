#!/usr/bin/env bash
# envforge serve against the aiohttp peer (bench/peers/aiohttp_env_server.py) under the same load:
# packs data/envs/trip_planning, starts both servers on ephemeral ports (envforge with its
# defaults: every isolation layer on, no trajectory store), runs `envforge bench serve --compare`
# at each client count and prints the tables; both servers are stopped on exit, even on failure.
#
#   bench/peers/compare.sh [BUILD_DIR]            (default: build)
#
# Environment: CLIENTS (default "64 256"), SESSIONS (episodes per run, default 1000), STEPS (tool
# calls per episode, default 20), TRANSPORT (ws or http, default ws), JSON=1 for the JSON reports,
# SERVE_ARGS (more envforge serve options, e.g. "--warm-sessions 256"), WARMUP (episodes each
# server plays, unmeasured, at each client count before its measured run: the figures of a server
# that has been running, as a trainer's does; default 0: from a cold start).
set -euo pipefail
BUILD_DIR=${1:-build}
cd "$(dirname "$0")/../.."
ENVFORGE="$BUILD_DIR/bin/envforge"
PYTHON=/usr/bin/python3  # Debian's, which has python3-aiohttp; not whatever python3 PATH finds first
CLIENTS=${CLIENTS:-"64 256"}
SESSIONS=${SESSIONS:-1000}
STEPS=${STEPS:-20}
TRANSPORT=${TRANSPORT:-ws}
SERVE_ARGS=${SERVE_ARGS:-}
WARMUP=${WARMUP:-0}

[[ -x "$ENVFORGE" ]] || { echo "compare.sh: no $ENVFORGE (build it first: make build)" >&2; exit 2; }
"$PYTHON" -c 'import aiohttp' 2>/dev/null ||
  { echo "compare.sh: $PYTHON has no aiohttp (apt-get install python3-aiohttp)" >&2; exit 2; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/envforge-compare.XXXXXX")
SERVE_PID=""
PEER_PID=""
stop() {  # SIGTERM, then wait: envforge drains and closes its sessions, the peer closes its loop
  local pid
  for pid in $SERVE_PID $PEER_PID; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in $SERVE_PID $PEER_PID; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap stop EXIT

# Waits for a server's port file; fails with its log when it exits or takes a minute.
wait_for_port() {
  local pid=$1 port_file=$2 log=$3
  for _ in $(seq 1 600); do
    [[ -s "$port_file" ]] && { cat "$port_file"; return 0; }
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "compare.sh: the server did not start; its log:" >&2
  cat "$log" >&2
  return 1
}

mkdir -p "$WORK/envs"
"$ENVFORGE" env pack data/envs/trip_planning -o "$WORK/envs/trip_planning.envdb" >/dev/null
# shellcheck disable=SC2086  # SERVE_ARGS: extra envforge serve options, word-split on purpose
"$ENVFORGE" serve --envs "$WORK/envs" --port 0 --port-file "$WORK/serve.port" $SERVE_ARGS 2>"$WORK/serve.log" &
SERVE_PID=$!
"$PYTHON" bench/peers/aiohttp_env_server.py --envs "$WORK/envs" --port 0 --port-file "$WORK/peer.port" \
  2>"$WORK/peer.log" &
PEER_PID=$!
SERVE_PORT=$(wait_for_port "$SERVE_PID" "$WORK/serve.port" "$WORK/serve.log")
PEER_PORT=$(wait_for_port "$PEER_PID" "$WORK/peer.port" "$WORK/peer.log")

url() {  # url PORT: the server's URL for the transport
  if [[ "$TRANSPORT" == ws ]]; then echo "ws://127.0.0.1:$1/ws"; else echo "http://127.0.0.1:$1"; fi
}

for clients in $CLIENTS; do
  if ((WARMUP > 0)); then
    echo "== warm-up: $WARMUP episodes on each server at $clients clients (not measured)"
    "$ENVFORGE" bench serve --url "$(url "$SERVE_PORT")" --compare "$(url "$PEER_PORT")" \
      --transport "$TRANSPORT" --env trip_planning --task cheapest_rated_hotel --tool get_all_cities \
      --sessions "$WARMUP" --steps "$STEPS" --concurrency "$clients" >/dev/null 2>"$WORK/bench.log" ||
      { echo "compare.sh: the warm-up failed:" >&2; cat "$WORK/bench.log" >&2; exit 1; }
  fi
  echo "== $clients clients over $TRANSPORT: $SESSIONS episodes of $STEPS get_all_cities calls (trip_planning," \
    "cheapest_rated_hotel)"
  if ! "$ENVFORGE" bench serve --url "$(url "$SERVE_PORT")" --compare "$(url "$PEER_PORT")" \
    --transport "$TRANSPORT" --env trip_planning --task cheapest_rated_hotel --tool get_all_cities \
    --sessions "$SESSIONS" --steps "$STEPS" --concurrency "$clients" ${JSON:+--json} 2>"$WORK/bench.log"; then
    echo "compare.sh: bench serve failed:" >&2
    cat "$WORK/bench.log" >&2
    exit 1
  fi
  echo
done
