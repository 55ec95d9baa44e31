#!/usr/bin/env bash
# Three `envforge serve` processes behind HAProxy on loopback, with `envforge bench serve` through
# HAProxy and reconciliation over the three stores (server/README.md, "A fleet behind HAProxy").
# Optionally, while the load runs: SIGKILL server s1 (KILL_AFTER=seconds) and drain server s2 and
# replace it with a new server s4 (DRAIN_AFTER=seconds). Prints bench serve's JSON report.
#
#   scripts/fleet/run_fleet.sh [BUILD_DIR]          (default build; needs envforge and haproxy)
#   SESSIONS=1000 STEPS=5 CONCURRENCY=48 TRANSPORT=ws KILL_AFTER=3 DRAIN_AFTER=5 scripts/fleet/run_fleet.sh
set -euo pipefail
BUILD_DIR=${1:-build}
cd "$(dirname "$0")/../.."
ENVFORGE="$PWD/$BUILD_DIR/bin/envforge"
SESSIONS=${SESSIONS:-1000} STEPS=${STEPS:-5} CONCURRENCY=${CONCURRENCY:-48} TRANSPORT=${TRANSPORT:-ws}
KILL_AFTER=${KILL_AFTER:-} DRAIN_AFTER=${DRAIN_AFTER:-}
command -v haproxy >/dev/null || { echo "run_fleet.sh: haproxy is not installed" >&2; exit 2; }
[[ -x "$ENVFORGE" ]] || { echo "run_fleet.sh: no $ENVFORGE (build it first)" >&2; exit 2; }

DIR=$(mktemp -d /tmp/envforge-fleet.XXXXXX)
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
mkdir -p "$DIR/envs"
"$ENVFORGE" env pack data/envs/trip_planning -o "$DIR/envs/trip_planning.envdb" >/dev/null

# Starts server ID on an ephemeral port; its pid goes to $DIR/ID.pid, its port to $DIR/ID.port.
start_server() {
  "$ENVFORGE" serve --envs "$DIR/envs" --server-id "$1" --port 0 --port-file "$DIR/$1.port" \
    --trajectories "$DIR/$1.sqlite" --max-sessions 2000 2>"$DIR/$1.log" &
  echo $! >"$DIR/$1.pid"
  PIDS+=($!)
  for _ in $(seq 1 600); do [[ -s "$DIR/$1.port" ]] && return; sleep 0.1; done
  echo "run_fleet.sh: server $1 did not start: $(cat "$DIR/$1.log")" >&2
  exit 1
}

# One command on HAProxy's admin socket; prints its answer.
admin() {
  /usr/bin/python3 -c 'import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.sendall(sys.argv[2].encode() + b"\n")
print(s.makefile().read().strip())' "$DIR/admin.sock" "$1"
}

free_port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

for id in s1 s2 s3; do start_server "$id"; done
FRONTEND_PORT=$(free_port)
sed -e "s/@FRONTEND_PORT@/$FRONTEND_PORT/" -e "s#@ADMIN_SOCKET@#$DIR/admin.sock#" \
  -e "s/@S1_PORT@/$(cat "$DIR/s1.port")/" -e "s/@S2_PORT@/$(cat "$DIR/s2.port")/" \
  -e "s/@S3_PORT@/$(cat "$DIR/s3.port")/" scripts/fleet/haproxy.cfg.in >"$DIR/haproxy.cfg"
haproxy -db -f "$DIR/haproxy.cfg" 2>"$DIR/haproxy.log" &
PIDS+=($!)
for _ in $(seq 1 100); do [[ -S "$DIR/admin.sock" ]] && break; sleep 0.1; done
[[ -S "$DIR/admin.sock" ]] || { echo "run_fleet.sh: haproxy did not start: $(cat "$DIR/haproxy.log")" >&2; exit 1; }
sleep 1  # the first health checks

# Every server's store, the replacement's included (it exists once s4 started).
STORES="s1=$DIR/s1.sqlite,s2=$DIR/s2.sqlite,s3=$DIR/s3.sqlite"
[[ -n "$DRAIN_AFTER" ]] && STORES="$STORES,s4=$DIR/s4.sqlite"
URL="http://127.0.0.1:$FRONTEND_PORT"
[[ "$TRANSPORT" == ws ]] && URL="ws://127.0.0.1:$FRONTEND_PORT/ws"
"$ENVFORGE" bench serve --url "$URL" --transport "$TRANSPORT" --env trip_planning --task cheapest_rated_hotel \
  --tool get_all_cities --sessions "$SESSIONS" --steps "$STEPS" --concurrency "$CONCURRENCY" \
  --trajectories "$STORES" --json ${BENCH_ARGS:-} \
  >"$DIR/report.json" 2>"$DIR/bench.log" &
BENCH=$!

if [[ -n "$KILL_AFTER" ]]; then
  sleep "$KILL_AFTER"
  echo "== SIGKILL s1" >&2
  kill -KILL "$(cat "$DIR/s1.pid")"
fi
if [[ -n "$DRAIN_AFTER" ]]; then
  sleep "$DRAIN_AFTER"
  echo "== replace s2: s4 starts in the spare slot s4" >&2
  start_server s4
  admin "set server envforge/s4 addr 127.0.0.1 port $(cat "$DIR/s4.port")" >&2
  admin "set server envforge/s4 state ready" >&2
  echo "== drain s2: HAProxy sends it no new connections, s2 takes no new sessions (SIGUSR1)" >&2
  admin "set server envforge/s2 state drain" >&2
  kill -USR1 "$(cat "$DIR/s2.pid")"
  for _ in $(seq 1 300); do  # its open sessions finish (30 s at most)
    live=$(curl -s -H 'Content-Type: application/json' -X POST "http://127.0.0.1:$(cat "$DIR/s2.port")/rpc" \
      -d '{"jsonrpc":"2.0","id":1,"method":"server/stats"}' |
      /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["result"]["sessions"]["live"])' || echo "?")
    [[ "$live" == 0 ]] && break
    sleep 0.1
  done
  echo "== s2 has $live sessions left: SIGTERM, its slot to MAINT" >&2
  kill -TERM "$(cat "$DIR/s2.pid")"
  admin "set server envforge/s2 state maint" >&2
fi
status=0
wait $BENCH || status=$?
cat "$DIR/report.json"
echo "bench serve exited $status; logs in $DIR" >&2
exit $status
