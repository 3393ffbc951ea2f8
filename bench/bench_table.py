#!/usr/bin/env python3
"""Turns flash_bench JSON output (--benchmark_out=F --benchmark_out_format=json)
into one markdown table: a row per shape, a column per input file (named by
its flash_backend), plus the standard-attention column where present.

    python3 bench/bench_table.py run-auto.json run-sm80.json [--filter bf16]
"""
import argparse
import json
import re

ROW = re.compile(r"^(flash|standard|tuned)/(\w+)/hd(\d+)/(causal|noncausal)/N(\d+)/")


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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--filter", default="", help="keep rows whose 'dtype hd causal' text contains this")
    args = ap.parse_args()
    runs = [load(p) for p in args.files]
    shapes = sorted({k[1:] for _, rows in runs for k in rows}, key=lambda k: (k[0], k[1], k[2], k[3]))
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


if __name__ == "__main__":
    main()
