#!/usr/bin/env python3
"""Engine step cost by shape, from `tandem --log-level debug bench --concurrency ...` logs:
mean forward time of the steps grouped by decodes and prefill tokens (bucketed), so the
cost of a mixed step in the real engine can be set beside `tandem bench --sections mixed`."""
import collections, re, sys

pat = re.compile(r"engine step \d+: (\d+) seqs \((\d+) decode\), (\d+) tokens; us: schedule "
                 r"([\d.]+) prepare ([\d.]+) forward ([\d.]+)")
groups = collections.defaultdict(list)
for line in open(sys.argv[1], errors="replace"):
    m = pat.search(line)
    if not m:
        continue
    seqs, dec, tok, _, _, fwd = m.groups()
    dec, tok, fwd = int(dec), int(tok), float(fwd)
    pre = tok - dec
    pb = 0 if pre == 0 else (pre + 31) // 32 * 32
    groups[(dec // 8 * 8, pb)].append((fwd, tok % 8 != 0))
print(f"{'decodes':>8} {'prefill<=':>9} {'steps':>6} {'fwd ms':>8} {'unaligned':>9}")
for (d, p), v in sorted(groups.items()):
    if len(v) < 3:
        continue
    print(f"{d:>5}-{d + 7:<2} {p:>9} {len(v):>6} {sum(x for x, _ in v) / len(v) / 1e3:>8.2f} "
          f"{sum(u for _, u in v) / len(v):>9.2f}")

# The whole run: how the forward time splits between decode-only and mixed steps.
kinds = collections.defaultdict(lambda: [0, 0.0, 0, 0])  # steps, forward us, decodes, prefill
for (d, p), v in groups.items():
    k = kinds["mixed" if p else "decode-only"]
    for fwd, _ in v:
        k[0] += 1
        k[1] += fwd
        k[2] += d + 4
        k[3] += p
total = sum(k[1] for k in kinds.values()) or 1.0
for name, (n, fwd, dec, pre) in sorted(kinds.items()):
    print(f"{name:>11}: {n} steps, {fwd / n / 1e3:.2f} ms mean, {fwd / total:.0%} of forward time, "
          f"~{dec / n:.0f} decodes and <= {pre / n:.0f} prompt tokens a step")
