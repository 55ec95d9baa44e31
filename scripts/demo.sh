#!/usr/bin/env bash
# The main job: synthesize environments in six categories (database, toolset, tasks escalated
# level by level, validated, audited; no pass@k filter until the trained policy lands); pack the
# reference environment, check it, solve every task in sandbox sessions, print the verdicts and
# the sandbox figures; serve it over JSON-RPC under load, list and replay a recorded episode;
# sample from the embedded DSA engine; roll the tiny model out and serve it on /v1.
set -euo pipefail
BUILD_DIR=${1:-build}
cd "$(dirname "$0")/.."
ENVFORGE="$BUILD_DIR/bin/envforge"
OUT_DIR="$BUILD_DIR/demo"
mkdir -p "$OUT_DIR"
BUNDLE="$OUT_DIR/trip_planning.envdb"

SYNTH_DIR="$OUT_DIR/synth"
rm -rf "$SYNTH_DIR"
echo "== synthesize: one environment per category, two task lineages each escalated over four levels,"
echo "   every candidate validated in sandbox sessions and audited (synthesis only: no policy to filter by yet)"
"$ENVFORGE" synth --categories trip_planning,logistics,e_commerce,calendar,inventory,course_planning \
  --envs 6 --tasks-per-env 2 --max-levels 4 --no-filter --seed 1 --out "$SYNTH_DIR"
ls "$SYNTH_DIR"
echo
echo "== pack data/envs/trip_planning -> $BUNDLE"
"$ENVFORGE" env pack data/envs/trip_planning -o "$BUNDLE"
echo
echo "== show"
"$ENVFORGE" env show "$BUNDLE"
echo
echo "== check (every gold solution must pass its verifier in a sandbox session)"
"$ENVFORGE" env check "$BUNDLE"
echo
echo "== solve every task"
for task in $("$ENVFORGE" env show "$BUNDLE" --json | /usr/bin/python3 -c 'import json,sys; print(" ".join(t["id"] for t in json.load(sys.stdin)["tasks"]))'); do
  printf '%-28s ' "$task"
  "$ENVFORGE" session solve "$BUNDLE" --task "$task" --json
done
echo
echo "== sandbox figures (bench sandbox, 1000 sessions)"
"$ENVFORGE" bench sandbox "$BUNDLE" --sessions 1000 --json
echo
echo "== serve: a real server on an ephemeral port, a 200-session load through WebSocket, then replay"
ENVS_DIR="$OUT_DIR/envs"
rm -rf "$ENVS_DIR" && mkdir -p "$ENVS_DIR" && cp "$BUNDLE" "$ENVS_DIR/"
TRAJ="$OUT_DIR/trajectories.sqlite"
rm -f "$TRAJ" "$TRAJ-wal" "$TRAJ-shm" "$OUT_DIR/port"
"$ENVFORGE" serve --envs "$ENVS_DIR" --port 0 --port-file "$OUT_DIR/port" --trajectories "$TRAJ" \
  --max-sessions 2000 2>"$OUT_DIR/serve.log" &
SERVER_PID=$!
trap 'kill $SERVER_PID 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do [[ -s "$OUT_DIR/port" ]] && break; sleep 0.1; done
PORT=$(cat "$OUT_DIR/port")
"$ENVFORGE" bench serve --url "ws://127.0.0.1:$PORT/ws" --env trip_planning --task cheapest_rated_hotel \
  --tool get_all_cities --sessions 200 --steps 20 --concurrency 64 --trajectories "$TRAJ" --json
kill -TERM $SERVER_PID && wait $SERVER_PID
trap - EXIT
echo
"$ENVFORGE" traj ls "$TRAJ" --limit 3
EPISODE=$("$ENVFORGE" traj ls "$TRAJ" --limit 1 --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')
echo "== replay $EPISODE"
"$ENVFORGE" replay "$TRAJ" "$EPISODE" --envs "$ENVS_DIR"
echo
echo "== embedded DSA engine: a tiny random DeepSeek-V3.2 checkpoint (fp8), 4 samples of one prompt"
MODEL_DIR="$OUT_DIR/tiny-model"
/usr/bin/python3 scripts/make_tiny_model.py --out "$MODEL_DIR" --preset tiny --dtype fp8 >/dev/null
"$ENVFORGE" generate --model "$MODEL_DIR" --prompt "Plan a trip to Suzhou" -n 4 --max-tokens 24 \
  --temperature 1.0 --top-p 0.95 --seed 7 --device auto
"$ENVFORGE" bench engine --model "$MODEL_DIR" --contexts 256,1024 --samples 16 --json
echo
echo "== rollout: the tiny model (random weights: pass@k stays 0 until a trained policy lands) plays every"
echo "   task of the reference environment, 16 episodes each, batched in one engine; recorded"
TINY_DIR="$OUT_DIR/tiny-fp32"
/usr/bin/python3 scripts/make_tiny_model.py --out "$TINY_DIR" --preset tiny --dtype fp32 >/dev/null
ROLLOUTS="$OUT_DIR/rollouts.sqlite"
rm -f "$ROLLOUTS" "$ROLLOUTS-wal" "$ROLLOUTS-shm"
"$ENVFORGE" rollout "$BUNDLE" --all --backend "embedded:$TINY_DIR" -n 16 --max-turns 4 --max-tokens-per-turn 48 \
  --seed 1 --trajectories "$ROLLOUTS"
ROLLOUT_EPISODE=$("$ENVFORGE" traj ls "$ROLLOUTS" --limit 1 --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')
echo "== traj show $ROLLOUT_EPISODE (first lines)"
"$ENVFORGE" traj show "$ROLLOUTS" "$ROLLOUT_EPISODE" | head -24
# The trained policy of issue 12; this section runs once data/models/policy-small is committed.
if [[ -f data/models/policy-small/model.safetensors ]]; then
  echo
  echo "== the shipped policy: data/models/policy-small (DeepSeek-V3.2 architecture, trained here by"
  echo "   scripts/train_policy.py) plays the held-out evaluation shop, 16 episodes per task; pass@k by tier"
  /usr/bin/python3 scripts/policy_eval.py --model data/models/policy-small --envs data/envs/shop_eval_a -n 16 \
    --modes dsa --build "$BUILD_DIR"
  SHOP="$OUT_DIR/shop_eval_a.envdb"
  "$ENVFORGE" env pack data/envs/shop_eval_a -o "$SHOP" >/dev/null
  POLICY_ROLLOUTS="$OUT_DIR/policy-rollouts.sqlite"
  rm -f "$POLICY_ROLLOUTS" "$POLICY_ROLLOUTS-wal" "$POLICY_ROLLOUTS-shm"
  "$ENVFORGE" rollout "$SHOP" --task supplier_city_00 --backend embedded:data/models/policy-small -n 4 --seed 1 \
    --trajectories "$POLICY_ROLLOUTS" >/dev/null
  PASSING=$("$ENVFORGE" traj ls "$POLICY_ROLLOUTS" --json | /usr/bin/python3 -c '
import json, sys
passing = [e["id"] for e in json.load(sys.stdin) if (e.get("verdict") or {}).get("passed")]
print(passing[0] if passing else "")')
  if [[ -n "$PASSING" ]]; then
    echo "== traj show $PASSING: a passing two-hop episode of the policy"
    "$ENVFORGE" traj show "$POLICY_ROLLOUTS" "$PASSING"
  else
    echo "(none of the 4 episodes of supplier_city_00 passed this time)"
  fi
fi
echo
echo "== bench rollout: 64 episodes at once vs one after another; recompute ratio"
"$ENVFORGE" bench rollout --model "$TINY_DIR" --env "$BUNDLE" --task cheapest_rated_hotel -n 64 --max-turns 4 --json
echo
echo "== serve the tiny model on /v1 (OpenAI-compatible): one chat completion, then 32 concurrent clients"
rm -f "$OUT_DIR/port"
"$ENVFORGE" serve --envs "$ENVS_DIR" --model "$TINY_DIR" --port 0 --port-file "$OUT_DIR/port" 2>"$OUT_DIR/serve-v1.log" &
SERVER_PID=$!
trap 'kill $SERVER_PID 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do [[ -s "$OUT_DIR/port" ]] && break; sleep 0.1; done
PORT=$(cat "$OUT_DIR/port")
curl -s "http://127.0.0.1:$PORT/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"messages": [{"role": "user", "content": "Plan a trip to Suzhou"}], "max_tokens": 16, "seed": 1}'
echo
"$ENVFORGE" bench v1 --url "http://127.0.0.1:$PORT" --concurrency 32 --requests 256 --max-tokens 16 --json
kill -TERM $SERVER_PID && wait $SERVER_PID || true
trap - EXIT
