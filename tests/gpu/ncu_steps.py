#!/usr/bin/env python3
"""Per-step kernel time from an ncu CSV (--csv --page raw --metrics gpu__time_duration.sum).

Steps end at the token-picking kernel (argmax or sampling). For each complete step: the
total kernel time, whether it carried a prefill chunk, and the time per kernel family, so
a mixed step can be compared with a decode-only one. Usage: ncu_steps.py FILE.csv
"""
import csv
import re
import sys
from collections import defaultdict

FAMILIES = [
    ("gemm", r"gemm|gemv|xmma|sm90|cutlass|nvjet|ampere|Kernel2"),
    ("decode_attn", r"decode_mma|decode_split|decode_combine"),
    ("prefill_attn", r"prefill_attn"),
    ("norm", r"rmsnorm"),
    ("qk_rope", r"qk_norm_rope"),
    ("swiglu", r"swiglu"),
    ("pick", r"argmax|sample_kernel"),
]


def family(name):
    for fam, pat in FAMILIES:
        if re.search(pat, name):
            return fam
    return "other"


def main(path):
    rows = list(csv.reader(open(path, errors="replace")))
    head = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
    cols = rows[head]
    k_name, k_time = cols.index("Kernel Name"), cols.index("gpu__time_duration.sum")
    k_bytes = cols.index("dram__bytes_read.sum") if "dram__bytes_read.sum" in cols else None
    k_grid = cols.index("launch__grid_size") if "launch__grid_size" in cols else None
    steps, cur = [], []
    unit = 1e-3  # --print-units base: nanoseconds
    for r in rows[head + 1:]:
        if len(r) <= max(k_name, k_time):
            continue
        v = r[k_time].replace(",", "")
        try:
            t = float(v)
        except ValueError:  # the units row: convert to microseconds
            u = r[k_time].strip()
            unit = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3,
                    "msecond": 1e3}.get(u, unit)
            continue
        extra = {}
        if k_bytes is not None:
            try:
                extra["bytes"] = float(r[k_bytes].replace(",", ""))
            except ValueError:
                pass
        if k_grid is not None:
            extra["grid"] = r[k_grid]
        cur.append((r[k_name], t * unit, extra))
        if family(r[k_name]) == "pick":
            steps.append(cur)
            cur = []
    if steps:
        steps = steps[1:]  # the first may have started before the profiled range
    print(f"{len(steps)} complete steps")
    for i, st in enumerate(steps[:40]):
        fam = defaultdict(float)
        for n, t, _ in st:
            fam[family(n)] += t
        kind = "mixed" if fam.get("prefill_attn") else "decode"
        parts = "  ".join(f"{k} {v / 1000:.2f}" for k, v in sorted(fam.items(), key=lambda x: -x[1]))
        print(f"step {i}: {kind:6s} {len(st):4d} kernels, {sum(t for _, t, _ in st) / 1000:.2f} ms: {parts}")
    top = defaultdict(lambda: [0, 0.0])
    for st in steps:
        for n, t, _ in st:
            top[n[:70]][0] += 1
            top[n[:70]][1] += t
    print("kernels by total time over those steps (count, ms):")
    for n, (c, t) in sorted(top.items(), key=lambda x: -x[1][1])[:14]:
        print(f"  {c:5d} {t / 1000:8.2f}  {n}")

    if k_bytes is not None or k_grid is not None:
        gemm_detail(steps)


def gemm_detail(steps):
    """Each step's GEMM kernels grouped by name and grid: time and DRAM read rate."""
    for i, st in enumerate(steps[:40]):
        groups = defaultdict(lambda: [0, 0.0, 0.0])
        for n, t, ex in st:
            if family(n) != "gemm":
                continue
            g = groups[(n[:60], ex.get("grid", "?"))]
            g[0] += 1
            g[1] += t
            g[2] += ex.get("bytes", 0.0)
        print(f"step {i} GEMMs (count, ms, TB/s read, MB read a call, grid, kernel):")
        for (n, grid), (c, t, b) in sorted(groups.items(), key=lambda x: -x[1][1])[:8]:
            rate = b / (t * 1e-6) / 1e12 if t else 0.0
            print(f"  {c:4d} {t / 1000:7.2f} {rate:5.2f} {b / c / 1e6:8.1f} {grid:>6s}  {n}")


if __name__ == "__main__":
    main(sys.argv[1])
