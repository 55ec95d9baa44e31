#!/usr/bin/env bash
# The main job: synthesize environments in six categories (database, toolset, tasks escalated
# level by level, validated, audited) and, with the shipped policy, shop environments filtered by
# its pass rate, rolled out and replayed, then trained on with GRPO (held-out pass@1 before and
# after); pack the
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
echo "   every candidate validated in sandbox sessions and audited (no filter here: the shipped policy knows only"
echo "   shops; the filtered run comes with it below)"
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
echo "== rollout: the tiny model (random weights: pass@k stays 0) plays every"
echo "   task of the reference environment, 16 episodes each, batched in one engine; recorded"
TINY_DIR="$OUT_DIR/tiny-fp32"
/usr/bin/python3 scripts/make_tiny_model.py --out "$TINY_DIR" --preset tiny --dtype fp32 >/dev/null
ROLLOUTS="$OUT_DIR/rollouts.sqlite"
rm -f "$ROLLOUTS" "$ROLLOUTS-wal" "$ROLLOUTS-shm"
"$ENVFORGE" rollout "$BUNDLE" --all --backend "embedded:$TINY_DIR" -n 16 --max-turns 4 --max-tokens-per-turn 48 \
  --seed 1 --trajectories "$ROLLOUTS"
ROLLOUT_EPISODE=$("$ENVFORGE" traj ls "$ROLLOUTS" --limit 1 --json | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')
echo "== traj show $ROLLOUT_EPISODE (first lines)"
# Into a file first: head closing the pipe early would end traj show with SIGPIPE (pipefail).
"$ENVFORGE" traj show "$ROLLOUTS" "$ROLLOUT_EPISODE" > "$OUT_DIR/episode.txt"
head -24 "$OUT_DIR/episode.txt"
# The trained policy of issue 12 (data/models/policy-small); skipped in a checkout without it.
if [[ -f data/models/policy-small/model.safetensors ]]; then
  echo
  echo "== the shipped policy: data/models/policy-small (DeepSeek-V3.2 architecture, trained here by"
  echo "   scripts/train_policy.py) plays the held-out evaluation shop, 16 episodes per task; pass@k by tier"
  /usr/bin/python3 scripts/policy_eval.py --model data/models/policy-small --envs data/envs/shop_eval_a -n 16 \
    --modes dsa --build "$BUILD_DIR"
  echo
  echo "== synthesize with the filter: shop environments (the policy's own kind, on seeds it never saw), two task"
  echo "   lineages escalated over five levels, every candidate validated, audited and played 20 times by the"
  echo "   policy; kept only when it passes sometimes but not always"
  SHOP_DIR="$OUT_DIR/synth-shop"
  rm -rf "$SHOP_DIR"
  "$ENVFORGE" synth --categories shop --envs 2 --tasks-per-env 2 --max-levels 5 --seed 3 \
    --policy embedded:data/models/policy-small --k 20 --max-turns 8 --out "$SHOP_DIR"
  KEPT=$(ls "$SHOP_DIR"/*.envdb 2>/dev/null | head -1)
  if [[ -n "$KEPT" ]]; then
    echo "== roll the policy out on the kept tasks of $(basename "$KEPT"), then show and replay a passing episode"
    POLICY_ROLLOUTS="$OUT_DIR/policy-rollouts.sqlite"
    rm -f "$POLICY_ROLLOUTS" "$POLICY_ROLLOUTS-wal" "$POLICY_ROLLOUTS-shm"
    "$ENVFORGE" rollout "$KEPT" --all --backend embedded:data/models/policy-small -n 8 --seed 1 --max-turns 8 \
      --trajectories "$POLICY_ROLLOUTS"
    PASSING=$("$ENVFORGE" traj ls "$POLICY_ROLLOUTS" --json | /usr/bin/python3 -c '
import json, sys
passing = [e["id"] for e in json.load(sys.stdin) if (e.get("verdict") or {}).get("passed")]
print(passing[0] if passing else "")')
    if [[ -n "$PASSING" ]]; then
      echo "== traj show $PASSING"
      "$ENVFORGE" traj show "$POLICY_ROLLOUTS" "$PASSING"
      echo "== replay $PASSING (tool steps re-executed on a fresh session and diffed, verdict re-judged)"
      "$ENVFORGE" replay "$POLICY_ROLLOUTS" "$PASSING" --envs "$SHOP_DIR"
    else
      echo "(no episode passed this time)"
    fi
  else
    echo "(the filter kept no task this time)"
  fi
  echo
  echo "== closed loop: GRPO (scripts/train_grpo.py) trains the shipped policy on two shops it never saw"
  echo "   (episodes played in sandbox sessions by the embedded engine, scored by their verifiers, keep routing"
  echo "   and keep sampling mask on), then held-out pass@1 before and after on data/envs/shop_eval_a"
  GRPO_DIR="$OUT_DIR/grpo"
  rm -rf "$GRPO_DIR"
  mkdir -p "$GRPO_DIR/train" "$GRPO_DIR/eval"
  for seed in 311 312; do
    /usr/bin/python3 scripts/policy_envs.py --seed "$seed" --out "$GRPO_DIR/train/shop_$seed" --instances 4 \
      --templates price_lookup,stock_lookup,supplier_city >/dev/null
  done
  ln -s "$PWD/data/envs/shop_eval_a" "$GRPO_DIR/eval/shop_eval_a"
  /usr/bin/python3 scripts/train_grpo.py --policy data/models/policy-small --train-envs "$GRPO_DIR/train" \
    --eval-envs "$GRPO_DIR/eval" --out "$GRPO_DIR/run" --steps "${GRPO_STEPS:-8}" --group 8 --tasks-per-step 8 \
    --eval-n 10 --lr 5e-5 --beta 0.02 --build "$BUILD_DIR"
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
