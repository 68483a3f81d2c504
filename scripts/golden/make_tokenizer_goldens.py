#!/usr/bin/env python3
"""Tokenizer and chat-template goldens from Hugging Face (runs on the GPU machine, which has
`tokenizers` and `transformers`; no network).

Usage: make_tokenizer_goldens.py TOKENIZER_DIR IN_DIR OUT_DIR
  TOKENIZER_DIR  folder with tokenizer.json and tokenizer_config.json (the pinned Qwen3 files)
  IN_DIR         made by make_tokenizer_corpus.py (corpus.jsonl, bytes.jsonl, chats.jsonl)
  OUT_DIR        gets, gzip-compressed JSON lines:
    encode.jsonl.gz  {"text", "ids"[, "ids_no_special"]}: Tokenizer.encode(text) and, where it
                     differs, the same with encode_special_tokens=True
    decode.jsonl.gz  {"ids", "text", "text_skip"}: decode with and without special tokens
    bytes.jsonl.gz   {"hex", "text", "ids"}: bytes.decode("utf-8", "replace"), then encode
    chats.jsonl.gz   each case plus "text" (apply_chat_template(tokenize=False)) and "ids"
    meta.json        versions, digests, cross-checks, and HF's own encode speed
"""
import gzip
import hashlib
import json
import os
import random
import sys
import time

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
import tokenizers  # noqa: E402
import transformers  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def write_jsonl_gz(path, rows):
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=9) as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def main():
    tok_dir, in_dir, out_dir = sys.argv[1:4]
    os.makedirs(out_dir, exist_ok=True)
    tk = Tokenizer.from_file(os.path.join(tok_dir, "tokenizer.json"))
    auto = AutoTokenizer.from_pretrained(tok_dir)
    meta = {"tokenizers": tokenizers.__version__, "transformers": transformers.__version__}
    for f in ("tokenizer.json", "tokenizer_config.json"):
        with open(os.path.join(tok_dir, f), "rb") as fh:
            meta[f + ".sha256"] = hashlib.sha256(fh.read()).hexdigest()

    # encode
    corpus = [r["text"] for r in read_jsonl(os.path.join(in_dir, "corpus.jsonl"))]
    enc_rows, all_ids, auto_mismatch = [], [], 0
    for text in corpus:
        ids = tk.encode(text, add_special_tokens=False).ids
        try:
            if auto(text, add_special_tokens=False)["input_ids"] != ids:
                auto_mismatch += 1
        except Exception as e:  # noqa: BLE001
            meta["auto_encode_error"] = repr(e)
        row = {"text": text, "ids": ids}
        try:
            tk.encode_special_tokens = True
            plain = tk.encode(text, add_special_tokens=False).ids
            tk.encode_special_tokens = False
            if plain != ids:
                row["ids_no_special"] = plain
        except Exception as e:  # noqa: BLE001
            meta["encode_special_tokens_error"] = repr(e)
        enc_rows.append(row)
        all_ids.append(ids)
    write_jsonl_gz(os.path.join(out_dir, "encode.jsonl.gz"), enc_rows)
    meta["corpus_docs"] = len(corpus)
    meta["corpus_bytes"] = sum(len(t.encode("utf-8")) for t in corpus)
    meta["corpus_tokens"] = sum(len(i) for i in all_ids)
    meta["auto_vs_tokenizers_encode_mismatches"] = auto_mismatch

    # HF's own speed on this machine (one thread), for docs/PERFORMANCE.md
    t0 = time.perf_counter()
    for text in corpus:
        tk.encode(text, add_special_tokens=False)
    meta["hf_encode_corpus_s"] = time.perf_counter() - t0
    big, n = [], 0
    for text, ids in zip(corpus, all_ids):
        big.append(text)
        n += len(ids)
        if n >= 131072:
            break
    big = "".join(big)
    t0 = time.perf_counter()
    meta["hf_128k_tokens"] = len(tk.encode(big, add_special_tokens=False).ids)
    meta["hf_128k_s"] = time.perf_counter() - t0
    meta["hf_128k_bytes"] = len(big.encode("utf-8"))

    # decode: slices of real encodings (cut anywhere, so UTF-8 breaks) and random ids
    rng = random.Random(7)
    dec_rows = []
    vocab_n = tk.get_vocab_size(with_added_tokens=True)
    meta["vocab_size_with_added"] = vocab_n
    for k in range(600):
        if k % 3 == 0:
            ids = [rng.randrange(vocab_n) for _ in range(rng.randint(1, 30))]
        elif k % 3 == 1:
            ids = [rng.choice([rng.randrange(256), rng.randrange(151643, vocab_n)]) for _ in range(rng.randint(1, 20))]
        else:
            src = rng.choice(all_ids)
            if not src:
                continue
            a = rng.randrange(len(src))
            ids = src[a:a + rng.randint(1, 50)]
        row = {"ids": ids, "text": tk.decode(ids, skip_special_tokens=False),
               "text_skip": tk.decode(ids, skip_special_tokens=True)}
        try:
            if auto.decode(ids) != row["text"]:
                row["auto_text"] = auto.decode(ids)
        except Exception as e:  # noqa: BLE001
            meta["auto_decode_error"] = repr(e)
        dec_rows.append(row)
    # ids past the table (the model's padded rows): what HF does with them
    for ids in ([151669], [151935, 9707], [9707, 151700, 11]):
        try:
            dec_rows.append({"ids": ids, "text": tk.decode(ids, skip_special_tokens=False),
                             "text_skip": tk.decode(ids, skip_special_tokens=True)})
        except Exception as e:  # noqa: BLE001
            meta.setdefault("decode_out_of_range_errors", []).append(f"{ids}: {e!r}")
    write_jsonl_gz(os.path.join(out_dir, "decode.jsonl.gz"), dec_rows)

    # invalid UTF-8 in
    byte_rows = []
    for r in read_jsonl(os.path.join(in_dir, "bytes.jsonl")):
        text = bytes.fromhex(r["hex"]).decode("utf-8", "replace")
        byte_rows.append({"hex": r["hex"], "text": text, "ids": tk.encode(text, add_special_tokens=False).ids})
    write_jsonl_gz(os.path.join(out_dir, "bytes.jsonl.gz"), byte_rows)

    # chat template
    chat_rows = []
    for c in read_jsonl(os.path.join(in_dir, "chats.jsonl")):
        msgs = json.loads(json.dumps(c["messages"]))
        for m in msgs:  # OpenAI clients send null beside tool_calls; the template needs ""
            if m.get("content") is None:
                m["content"] = ""
        kw = {}
        if c["enable_thinking"] is not None:
            kw["enable_thinking"] = c["enable_thinking"]
        row = dict(c)
        try:
            text = auto.apply_chat_template(msgs, tools=c["tools"], add_generation_prompt=c["add_generation_prompt"],
                                            tokenize=False, **kw)
            row["text"] = text
            row["ids"] = tk.encode(text, add_special_tokens=False).ids
        except Exception as e:  # noqa: BLE001
            row["error"] = repr(e)
        chat_rows.append(row)
    write_jsonl_gz(os.path.join(out_dir, "chats.jsonl.gz"), chat_rows)
    meta["chat_cases"] = len(chat_rows)
    meta["chat_errors"] = sum(1 for r in chat_rows if "error" in r)
    with open(os.path.join(out_dir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(json.dumps(meta, indent=1))


if __name__ == "__main__":
    main()
