#!/usr/bin/env python3
"""Builds the inputs of the tokenizer goldens (runs on the development machine, no network):

  OUT/corpus.jsonl      >= 1 MB of documents: hand-written text in 20+ languages and scripts,
                        edge cases, code (this repository's own sources), numbers, whitespace
                        runs, CRLF, and seeded random Unicode mixtures; {"text": ...} per line
  OUT/decode.jsonl      id sequences to decode (made from the corpus by the golden script)
  OUT/bytes.jsonl       random byte strings, mostly invalid UTF-8 ({"hex": ...})
  OUT/chats.jsonl       60+ chat-template cases (messages, tools, options)

make_tokenizer_goldens.py then runs Hugging Face on these (on the GPU machine).
Usage: make_tokenizer_corpus.py OUT_DIR
"""
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tokenizer_texts import CODE_SAMPLES, EDGE_CASES, LANGUAGES  # noqa: E402
from tokenizer_chats import make_chats  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SEED = 20261130

# Blocks assigned long ago (Unicode <= 10), so every engine's tables agree on them.
RANGES = [
    (0x20, 0x7E), (0xA0, 0x17F), (0x180, 0x24F), (0x250, 0x2AF), (0x300, 0x36F),
    (0x370, 0x3FF), (0x400, 0x4FF), (0x530, 0x58F), (0x590, 0x5FF), (0x600, 0x6FF),
    (0x900, 0x97F), (0x980, 0x9FF), (0xB80, 0xBFF), (0xE00, 0xE7F), (0xE80, 0xEFF),
    (0xF00, 0xFFF), (0x10A0, 0x10FF), (0x1100, 0x11FF), (0x1200, 0x137F), (0x1780, 0x17FF),
    (0x1800, 0x18AF), (0x1E00, 0x1EFF), (0x2000, 0x206F), (0x20A0, 0x20BF), (0x2100, 0x214F),
    (0x2190, 0x21FF), (0x2200, 0x22FF), (0x2500, 0x257F), (0x3000, 0x303F), (0x3040, 0x30FF),
    (0x4E00, 0x9FA5), (0xAC00, 0xD7A3), (0xF900, 0xFAFF), (0xFE00, 0xFE0F), (0xFF00, 0xFFEF),
    (0x1D400, 0x1D7FF), (0x1F300, 0x1F5FF), (0x1F600, 0x1F64F), (0x1F900, 0x1F9FF),
    (0x20000, 0x2A6D6),
]
SPECIAL_BITS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>",
                "<tool_call>", "</tool_call>", "<|im_", "|>", "<", "<|", "\u200d", "\ufe0f",
                "\r\n", "\n\n", "   ", "\t", "'s", "'LL", " 123", "😀", "👍🏽"]


def random_mixture(rng, n_chars):
    out = []
    while len(out) < n_chars:
        r = rng.random()
        if r < 0.08:
            out.append(rng.choice(SPECIAL_BITS))
        elif r < 0.45:
            # runs from one block look like real text (long \p{L}+ words, CJK runs)
            lo, hi = rng.choice(RANGES)
            out.extend(chr(rng.randint(lo, hi)) for _ in range(rng.randint(1, 12)))
        elif r < 0.6:
            out.append(" " * rng.randint(1, 3))
        else:
            lo, hi = rng.choice(RANGES)
            out.append(chr(rng.randint(lo, hi)))
    s = "".join(out)
    # drop surrogates and unassigned-in-Python code points that cannot be UTF-8 encoded
    return s.encode("utf-8", "ignore").decode("utf-8")


def repo_sources():
    texts = []
    for top in ("src", "tests", "scripts", "docs", "cmake"):
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for f in sorted(files):
                if f.endswith((".cpp", ".h", ".cu", ".cuh", ".py", ".sh", ".md", ".cmake", ".txt")):
                    p = os.path.join(dirpath, f)
                    try:
                        with open(p, encoding="utf-8") as fh:
                            texts.append(fh.read())
                    except (UnicodeDecodeError, OSError):
                        pass
    return texts


def chunks(rng, text, lo, hi):
    i = 0
    while i < len(text):
        n = rng.randint(lo, hi)
        yield text[i:i + n]
        i += n


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    rng = random.Random(SEED)
    docs = []
    for name, text in LANGUAGES.items():
        docs.append(text)
        docs.append(text.upper() if rng.random() < 0.5 else text.replace(" ", "  "))
    docs.extend(EDGE_CASES)
    docs.extend(CODE_SAMPLES)
    # Long multilingual documents: every sample, shuffled, many times over.
    samples = list(LANGUAGES.values()) + EDGE_CASES + CODE_SAMPLES
    for _ in range(40):
        rng.shuffle(samples)
        sep = rng.choice(["\n", "\n\n", " ", "\r\n", "\t", ""])
        docs.append(sep.join(samples))
    # Numbers and whitespace runs.
    for _ in range(200):
        parts = []
        for _ in range(rng.randint(1, 40)):
            k = rng.random()
            if k < 0.3:
                parts.append(str(rng.randint(-10**12, 10**12)))
            elif k < 0.5:
                parts.append(f"{rng.uniform(-1e6, 1e6):.{rng.randint(0, 9)}f}")
            elif k < 0.7:
                parts.append(rng.choice([" ", "\t", "\n", "\r\n", "\u3000", "\u00a0"]) * rng.randint(1, 20))
            else:
                parts.append(rng.choice(["x", "item", "価格", "цена", "€", "$", "%", "KB", ":", "-"]))
        docs.append(rng.choice(["", " ", "\n"]).join(parts))
    # This repository's own sources, whole and in pieces.
    src = repo_sources()
    for t in src:
        docs.append(t)
        if rng.random() < 0.3:
            docs.extend(chunks(rng, t, 1, 300))
    # Seeded random Unicode mixtures until the corpus holds >= 1.1 MB.
    total = sum(len(d.encode("utf-8")) for d in docs)
    while total < 1_150_000:
        d = random_mixture(rng, rng.choice([5, 50, 400, 3000]))
        docs.append(d)
        total += len(d.encode("utf-8"))
    docs = [d for d in docs if d]
    with open(os.path.join(out_dir, "corpus.jsonl"), "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps({"text": d}, ensure_ascii=False) + "\n")

    # Random byte strings: mostly ill-formed UTF-8, with valid pieces and truncations.
    with open(os.path.join(out_dir, "bytes.jsonl"), "w") as f:
        pieces = [b"\xe4\xbd\xa0", b"\xf0\x9f\x98\x80", b"\xc3\xa9", b"a", b" ", b"\n",
                  b"<|im_end|>", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80", b"\xe0\x80\x80",
                  b"\xf0\x80\x80\x80", b"\xff", b"\xfe", b"\x80", b"\xbf", b"\xe4\xbd", b"\xf0\x9f\x98"]
        for i in range(400):
            if i % 2:
                b = bytes(rng.randint(0, 255) for _ in range(rng.randint(1, 60)))
            else:
                b = b"".join(rng.choice(pieces) for _ in range(rng.randint(1, 20)))
            f.write(json.dumps({"hex": b.hex()}) + "\n")

    with open(os.path.join(out_dir, "chats.jsonl"), "w", encoding="utf-8") as f:
        for c in make_chats(rng):
            f.write(json.dumps(c, ensure_ascii=False) + "\n")
    print(f"{len(docs)} documents, {total} bytes -> {out_dir}")


if __name__ == "__main__":
    main()
