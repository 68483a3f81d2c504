#!/usr/bin/env python3
"""HTTP side of the HTTP-overhead benchmark (run on the GPU machine by tests/gpu/http.sh).

C closed-loop clients each send R raw /api/generate requests (NDJSON streaming, a prompt of
P words, O output tokens with EOS ignored, greedy) to a running `tandem serve`. The last
NDJSON line carries the server's own timings, so the overhead of the HTTP layer is measured
per request: client TTFT minus the server's prompt_eval_duration, and the client-side token
rate against the server's eval rate. Standard library only.
"""
import argparse, http.client, json, math, random, statistics, threading, time

ap = argparse.ArgumentParser()
ap.add_argument("--host", default="127.0.0.1")
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--model", required=True)
ap.add_argument("--concurrency", type=int, default=1)
ap.add_argument("--requests", type=int, default=2)
ap.add_argument("--prompt-len", type=int, default=400)
ap.add_argument("--output-len", type=int, default=256)
ap.add_argument("--ramp-ms", type=float, default=0.0,
                help="client i starts i/C of the way into this window (0: all at once)")
a = ap.parse_args()

WORDS = ["alpha", "river", "stone", "cloud", "seven", "market", "quiet", "orange"]
lock = threading.Lock()
rows = []  # (client_ttft_s, server_prompt_eval_s, client_tok_s, server_tok_s, tokens)


def one(rng):
    body = json.dumps({"model": a.model, "raw": True, "stream": True,
                       "prompt": " ".join(rng.choice(WORDS) for _ in range(a.prompt_len)),
                       "options": {"num_predict": a.output_len, "ignore_eos": True,
                                   "temperature": 0}})
    conn = http.client.HTTPConnection(a.host, a.port, timeout=300)
    t0 = time.perf_counter()
    conn.request("POST", "/api/generate", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"status {resp.status}: {resp.read()[:200]}")
    first = last = None
    final = None
    for line in resp:
        now = time.perf_counter()
        obj = json.loads(line)
        if obj.get("done"):
            final = obj
            break
        if obj.get("response"):
            if first is None:
                first = now
            last = now
    conn.close()
    n = final["eval_count"]
    client_rate = (n - 1) / (last - first) if last and first and last > first else 0.0
    server_rate = n / (final["eval_duration"] / 1e9)
    with lock:
        rows.append((first - t0, final["prompt_eval_duration"] / 1e9, client_rate, server_rate, n))


def client(i):
    rng = random.Random(1000 + i)
    time.sleep(a.ramp_ms / 1e3 * i / a.concurrency)
    for _ in range(a.requests):
        one(rng)


t0 = time.perf_counter()
ts = [threading.Thread(target=client, args=(i,)) for i in range(a.concurrency)]
for t in ts: t.start()
for t in ts: t.join()
wall = time.perf_counter() - t0
tokens = sum(r[4] for r in rows)
ttft = sorted(r[0] * 1e3 for r in rows)
over = sorted((r[0] - r[1]) * 1e3 for r in rows)
ratio = statistics.median(r[2] / r[3] for r in rows if r[3] > 0)
print(f"http C={a.concurrency} reqs={len(rows)} out tok/s {tokens / wall:.1f} "
      f"TTFT p50 {statistics.median(ttft):.1f} ms p99 {ttft[max(0, math.ceil(0.99 * len(ttft)) - 1)]:.1f} ms "
      f"added TTFT p50 {statistics.median(over):.2f} ms max {over[-1]:.2f} ms "
      f"client/server token rate {ratio:.4f}")
