#!/usr/bin/env python3
"""Turns flash_bench JSON output (--benchmark_out=F --benchmark_out_format=json)
into markdown tables: the sweep (a row per shape, a column per input file,
named by its flash_backend, plus the standard-attention column where
present), then, where the files have them, the decode rows (--decode: time,
GB/s of K+V and the fraction of the run's read ceiling, per file) and the
varlen rows (--varlen: packed and dense TFLOP/s and their ratio, per file).

    python3 bench/bench_table.py run-auto.json run-sm80.json [--filter bf16]
"""
import argparse
import json
import re

ROW = re.compile(r"^(flash|standard|tuned)/(\w+)/hd(\d+)/(causal|noncausal)/N(\d+)/")
DECODE_ROW = re.compile(r"^decode/(\w+)/hd(\d+)/q(\d+)kv(\d+)/B(\d+)/L(\d+)/(dense|paged\d+)/")
VARLEN_ROW = re.compile(r"^varlen/(\w+)/hd(\d+)/h(\d+)/(causal|noncausal)/(packed|dense)/")


def load(path):
    with open(path) as f:
        data = json.load(f)
    ctx = data.get("context", {})
    rows = {}
    for b in data.get("benchmarks", []):
        m = ROW.match(b["name"])
        if not m or "TFLOP/s" not in b:
            continue
        impl, dtype, hd, causal, n = m.groups()
        rows[(impl, dtype, int(hd), causal == "causal", int(n))] = b
    return ctx, rows


def load_inference(path):
    """The decode and varlen rows of one file: ({(L, batch, cache): row}, {(causal, packed): row})."""
    with open(path) as f:
        data = json.load(f)
    decode, varlen = {}, {}
    for b in data.get("benchmarks", []):
        m = DECODE_ROW.match(b["name"])
        if m and "GB/s" in b:
            _, _, _, _, batch, seqlen, cache = m.groups()
            decode[(int(seqlen), int(batch), cache)] = b
        m = VARLEN_ROW.match(b["name"])
        if m and "TFLOP/s" in b:
            _, _, _, causal, kind = m.groups()
            varlen[(causal == "causal", kind == "packed")] = b
    return decode, varlen


def cache_order(cache):
    return -1 if cache == "dense" else int(cache[len("paged"):])


def print_inference(paths, runs):
    loaded = [load_inference(p) for p in paths]
    decode_keys = sorted({k for d, _ in loaded for k in d}, key=lambda k: (k[0], k[1], cache_order(k[2])))
    if decode_keys:
        head = ["L", "batch", "cache"]
        for ctx, _ in runs:
            name = ctx.get("flash_backend", "?")
            head += [f"{name} kernel", f"{name} us", f"{name} GB/s", f"{name} / read"]
        print("\n| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for key in decode_keys:
            cells = [str(key[0]), str(key[1]), key[2]]
            for (ctx, _), (decode, _) in zip(runs, loaded):
                b = decode.get(key)
                if b:
                    cells += [b.get("label", "-"), f"{b['median_us']:.1f}", f"{b['GB/s']:.0f}",
                              f"{b['frac_bandwidth']:.3f}"]
                else:
                    cells += ["-"] * 4
            print("| " + " | ".join(cells) + " |")
        for ctx, _ in runs:
            print(f"\n- {ctx.get('flash_backend')}: read ceiling "
                  f"{float(ctx.get('read_bandwidth_gbps', 0)):.0f} GB/s")
    if any(v for _, v in loaded):
        head = ["causal"]
        for ctx, _ in runs:
            name = ctx.get("flash_backend", "?")
            head += [f"{name} varlen TFLOP/s", f"{name} dense TFLOP/s", f"{name} varlen / dense"]
        print("\n| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for causal in (False, True):
            cells = ["yes" if causal else "no"]
            for _, varlen in loaded:
                packed, dense = varlen.get((causal, True)), varlen.get((causal, False))
                cells.append(f"{packed['TFLOP/s']:.1f}" if packed else "-")
                cells.append(f"{dense['TFLOP/s']:.1f}" if dense else "-")
                cells.append(f"{packed['TFLOP/s'] / dense['TFLOP/s']:.3f}"
                             if packed and dense and dense["TFLOP/s"] > 0 else "-")
            print("| " + " | ".join(cells) + " |")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--filter", default="", help="keep rows whose 'dtype hd causal' text contains this")
    args = ap.parse_args()
    runs = [load(p) for p in args.files]
    shapes = sorted({k[1:] for _, rows in runs for k in rows}, key=lambda k: (k[0], k[1], k[2], k[3]))
    if not shapes:
        print_inference(args.files, runs)
        return
    head = ["dtype", "head_dim", "causal", "N"]
    tuned = any(k[0] == "tuned" for _, rows in runs for k in rows)
    for ctx, _ in runs:
        name = ctx.get("flash_backend", "?")
        head += [f"flash {name} TFLOP/s", f"{name} / GEMM"]
        if tuned:
            head += [f"autotuned {name} TFLOP/s"]
    head += ["standard TFLOP/s"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for shape in shapes:
        dtype, hd, causal, n = shape
        label = f"{dtype} {hd} {'causal' if causal else 'noncausal'}"
        if args.filter and args.filter not in label:
            continue
        cells = [dtype, str(hd), "yes" if causal else "no", str(n)]
        standard = "-"
        for ctx, rows in runs:
            f = rows.get(("flash",) + shape)
            cells += [f"{f['TFLOP/s']:.1f}", f"{f['frac_ceiling']:.3f}"] if f else ["-", "-"]
            if tuned:
                t = rows.get(("tuned",) + shape)
                cells.append(f"{t['TFLOP/s']:.1f}" if t else "-")
            s = rows.get(("standard",) + shape)
            if s:
                standard = f"{s['TFLOP/s']:.1f}"
        cells.append(standard)
        print("| " + " | ".join(cells) + " |")
    for ctx, _ in runs:
        print(f"\n- {ctx.get('flash_backend')}: {ctx.get('gpu')}, {ctx.get('date')}, GEMM ceiling "
              f"{float(ctx.get('gemm_bf16_8192_tflops', 0)):.1f} TFLOP/s")
    print_inference(args.files, runs)


if __name__ == "__main__":
    main()
