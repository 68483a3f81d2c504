#!/usr/bin/env bash
# with_server.sh <tandem> [--scripted] <extra serve flags...> -- <command...>
# Makes the tiny test model (served as "tiny"), or with --scripted the scripted model of
# script_texts.json (served as "scripted": it writes "text", or "tool_text" after a tool
# result), starts `tandem serve` on a free loopback port, runs the command with TANDEM_URL
# and TANDEM_MODEL set, then stops the server (by its pid) and reports the command's status.
# Every wait is bounded; the server never outlives this script.
set -u
T=$1; shift
scripted=0
if [ "${1:-}" = "--scripted" ]; then scripted=1; shift; fi
flags=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do flags+=("$1"); shift; done
shift
tmp=$(mktemp -d)
pid=""
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
if [ $scripted = 1 ]; then
  texts="$(dirname "$0")/script_texts.json"
  name=scripted
  "$T" testmodel --preset script --out "$tmp/$name" \
    --text "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["text"], end="")' "$texts")" \
    --tool-text "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tool_text"], end="")' "$texts")" \
    >/dev/null || { echo "testmodel --preset script failed"; exit 1; }
  export TANDEM_SCRIPT_TEXTS="$texts"
else
  name=tiny
  "$T" testmodel --preset tiny --seed 3 --out "$tmp/$name" >/dev/null || { echo "testmodel failed"; exit 1; }
fi
export TANDEM_MODEL=$name
"$T" serve --model "$tmp/$name" --served-model-name $name --port 0 --backend cpu "${flags[@]}" \
  --data-dir "$tmp/data" >"$tmp/out.log" 2>"$tmp/err.log" &
pid=$!
port=""
for _ in $(seq 300); do
  port=$(grep -oE 'http://127\.0\.0\.1:[0-9]+' "$tmp/out.log" 2>/dev/null | head -1 | sed 's/.*://')
  [ -n "$port" ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$port" ]; then
  echo "server did not start:"; cat "$tmp/out.log" "$tmp/err.log" | tail -20; exit 1
fi
export TANDEM_URL="http://127.0.0.1:$port"
"$@"
rc=$?
if ! kill -0 "$pid" 2>/dev/null; then
  wait "$pid"; st=$?
  # 128+N: killed by signal N (139: SIGSEGV); its backtrace is in the server log below.
  echo "FAIL: the server died during the test (exit status $st)"; rc=1
fi
# The server's own log, whole up to 300 lines (a crash report ends it), kept in ctest's log.
[ $rc -ne 0 ] && { echo "--- server log (stderr, last 300 lines) ---"; tail -300 "$tmp/err.log"; }
exit $rc
