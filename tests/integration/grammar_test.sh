#!/usr/bin/env bash
# tandem grammar: the JSONSchemaBench sample (every valid instance accepted and every
# invalid one rejected by the schemas that compile, at least 85% of them compiling), then
# regex, choice and grammar constraints and refusals from the command line.
set -euo pipefail
tandem=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

gzip -dc tests/golden/structured/jsonschemabench-dev.json.gz > "$dir/bench.json"
if ! "$tandem" grammar check --bench "$dir/bench.json" > "$dir/bench.out"; then
  grep -E "^FAIL" "$dir/bench.out" | head -20
  fail "an invalid instance was accepted or a valid one rejected"
fi
grep -E "^(schemas|valid|invalid|compile|mask)" "$dir/bench.out"
pct=$(sed -n 's/^schemas compiled: .* (\([0-9.]*\)%)$/\1/p' "$dir/bench.out")
awk -v p="$pct" 'BEGIN { exit !(p >= 85) }' || fail "only $pct% of the schemas compiled"

# A refusal names the keyword and where it is, and exits 1.
echo '{"properties":{"tags":{"type":"array","uniqueItems":true}}}' > "$dir/s.json"
if out=$("$tandem" grammar compile --schema "$dir/s.json"); then fail "uniqueItems compiled"; fi
grep -q "keyword 'uniqueItems' at '/properties/tags'" <<< "$out" || fail "refusal: $out"

# Instances of each kind: accepted, or rejected at the right byte.
printf '%s' '{"n": 3, "tags": ["a"]}' > "$dir/ok.json"
printf '%s' '{"n": "3"}' > "$dir/bad.json"
echo '{"type":"object","properties":{"n":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}}},"required":["n"]}' > "$dir/s.json"
out=$("$tandem" grammar check --schema "$dir/s.json" --instance "$dir/ok.json" "$dir/bad.json" || true)
grep -q "ok.json: accepted" <<< "$out" || fail "schema instance: $out"
grep -q "bad.json: rejected at byte 6" <<< "$out" || fail "schema instance: $out"

printf '%s' '2024-06-30' > "$dir/date.txt"
printf '%s' '2024-6-30' > "$dir/nodate.txt"
out=$("$tandem" grammar check --regex '\d{4}-\d{2}-\d{2}' --instance "$dir/date.txt" "$dir/nodate.txt" || true)
grep -q "date.txt: accepted" <<< "$out" || fail "regex: $out"
grep -q "nodate.txt: rejected at byte 6" <<< "$out" || fail "regex: $out"

printf '%s' 'positive' > "$dir/c1.txt"
printf '%s' 'positivity' > "$dir/c2.txt"
out=$("$tandem" grammar check --choice positive --choice negative --instance "$dir/c1.txt" "$dir/c2.txt" || true)
grep -q "c1.txt: accepted" <<< "$out" || fail "choice: $out"
grep -q "c2.txt: rejected" <<< "$out" || fail "choice: $out"

cat > "$dir/g.lark" <<'G'
start: call ("; " call)*
call: NAME "(" [ARG ("," ARG)*] ")"
NAME: /[a-z]+/
ARG: /[0-9]+/
G
printf '%s' 'move(1,2); stop()' > "$dir/g1.txt"
printf '%s' 'move(1,)' > "$dir/g2.txt"
out=$("$tandem" grammar check --grammar "$dir/g.lark" --instance "$dir/g1.txt" "$dir/g2.txt" || true)
grep -q "g1.txt: accepted" <<< "$out" || fail "grammar: $out"
grep -q "g2.txt: rejected at byte 7" <<< "$out" || fail "grammar: $out"
echo "grammar tests passed"
