#!/usr/bin/env bash
# The main job until the synthesis loop exists: pack the reference environment, check it, solve
# every task in sandbox sessions, print the verdicts and the sandbox figures.
set -euo pipefail
BUILD_DIR=${1:-build}
cd "$(dirname "$0")/.."
ENVFORGE="$BUILD_DIR/bin/envforge"
OUT_DIR="$BUILD_DIR/demo"
mkdir -p "$OUT_DIR"
BUNDLE="$OUT_DIR/trip_planning.envdb"

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
