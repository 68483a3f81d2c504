#!/usr/bin/env bash
# Tokenizer speed on one core (encode is single-threaded): the >= 1 MB golden corpus as one text, then a prompt of
# >= 128k tokens cut from it. Usage: bench/tokenizer_bench.sh [path/to/tandem]
set -euo pipefail
cd "$(dirname "$0")/.."
T=${1:-build/tandem}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gzip -dc tests/golden/tokenizer/encode.jsonl.gz | python3 -c '
import json, sys
docs = [json.loads(l) for l in sys.stdin]
open(sys.argv[1], "w", encoding="utf-8").write("".join(d["text"] for d in docs))
big, n = [], 0
for d in docs:
    big.append(d["text"]); n += len(d["ids"])
    if n >= 131072: break
open(sys.argv[2], "w", encoding="utf-8").write("".join(big))
' "$tmp/corpus.txt" "$tmp/prompt128k.txt"
echo "== corpus ($(wc -c <"$tmp/corpus.txt") bytes)"
"$T" tokenize --bench 5 <"$tmp/corpus.txt"
echo "== 128k-token prompt"
"$T" tokenize --bench 5 <"$tmp/prompt128k.txt"
