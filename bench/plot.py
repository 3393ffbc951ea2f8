#!/usr/bin/env python3
"""Turns flash_bench JSON output (--benchmark_out=F --benchmark_out_format=json)
into the seed's chart: TFLOP/s against sequence length (log2 axis), one panel
per (causal, head_dim), a line per input file (one flash backend each,
labelled from its context) plus standard attention; one PNG per dtype.

    flash_bench --no-standard --backend=sm80 --benchmark_out=sm80.json --benchmark_out_format=json
    python3 bench/plot.py bench/results/2026-12-05-h200-s44-auto.json sm80.json \\
        -o docs/h200-{dtype}.png

'{dtype}' in the output path is replaced by bf16 / fp16; without it, more
than one dtype gets '-<dtype>' before the extension. A file run with
--backend=auto is labelled with the kernel auto picks, from the file's
compute_capability (older files: from the GPU name, sm90 on H100, H200, H800,
H20, GH200); --labels overrides the
labels, one per file. Needs matplotlib (a development tool, not a build
dependency): python3 -m pip install matplotlib
"""
import argparse
import os
import re
import sys

sys.dont_write_bytecode = True  # no __pycache__ in bench/ from the import below
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_table import load  # noqa: E402  (one parser for the table and the chart)

HOPPER = re.compile(r"\b(G?H100|H200|H800|H20|GH200)\b")
SERIES_STYLE = {  # colour, marker, line style per series, in legend order
    "sm90": ("#1f77b4", "o", "-"),
    "sm80": ("#ff7f0e", "s", "-"),
    "auto": ("#2ca02c", "o", "-"),
    "standard": ("#7f7f7f", "^", "--"),
}
EXTRA_COLOURS = ["#d62728", "#9467bd", "#8c564b", "#e377c2"]


def flash_label(ctx):
    backend = ctx.get("flash_backend", "?")
    if backend == "auto":
        # flash_bench records the device's compute capability; older files
        # only have the GPU name.
        cc = ctx.get("compute_capability")
        if cc is not None:
            backend = "sm90" if cc.startswith("9.") else "sm80"
        elif HOPPER.search(ctx.get("gpu", "")):
            backend = "sm90"
    return backend


def length_label(n):
    return f"{n // 1024}k" if n >= 1024 and n % 1024 == 0 else str(n)


def output_path(pattern, dtype, n_dtypes):
    if "{dtype}" in pattern:
        return pattern.replace("{dtype}", dtype)
    if n_dtypes == 1:
        return pattern
    root, ext = os.path.splitext(pattern)
    return f"{root}-{dtype}{ext or '.png'}"


def title(runs, dtype):
    gpus = sorted({run["ctx"].get("gpu", "unknown GPU") for run in runs})
    dates = sorted({run["ctx"].get("date", "")[:10] for run in runs} - {""})
    ceilings = [float(run["ctx"]["gemm_bf16_8192_tflops"]) for run in runs if "gemm_bf16_8192_tflops" in run["ctx"]]
    text = f"flash forward, {dtype}: {', '.join(gpus)}, {' / '.join(dates) or 'undated'}"
    if ceilings:
        text += f"\ncuBLAS bf16 GEMM 8192³ in the same run{'s' if len(ceilings) > 1 else ''}: " + \
                " / ".join(f"{c:.0f}" for c in ceilings) + " TFLOP/s"
    return text


def plot_dtype(plt, runs, dtype, path):
    shapes = {k[1:] for run in runs for k in run["rows"] if k[1] == dtype}
    head_dims = sorted({s[1] for s in shapes})
    causals = sorted({s[2] for s in shapes})
    fig, axes = plt.subplots(len(causals), len(head_dims), figsize=(4.2 * len(head_dims), 3.4 * len(causals) + 1.0),
                             sharex=True, sharey=True, squeeze=False)
    # The series: each file's flash rows, then standard attention from the first file that has it.
    series = []
    for i, run in enumerate(runs):
        style = SERIES_STYLE.get(run["backend"]) or (EXTRA_COLOURS[i % len(EXTRA_COLOURS)], "o", "-")
        series.append((run["label"], "flash", run["rows"], style))
    standard = next((run["rows"] for run in runs if any(k[0] == "standard" for k in run["rows"])), None)
    if standard is not None:
        series.append(("standard attention (cuBLAS)", "standard", standard, SERIES_STYLE["standard"]))

    all_n = sorted({s[3] for s in shapes})
    for r, causal in enumerate(causals):
        for c, hd in enumerate(head_dims):
            ax = axes[r][c]
            for name, impl, rows, (colour, marker, linestyle) in series:
                points = sorted((k[4], b["TFLOP/s"]) for k, b in rows.items()
                                if k[:4] == (impl, dtype, hd, causal))
                if points:
                    ax.plot([p[0] for p in points], [p[1] for p in points], color=colour, marker=marker,
                            linestyle=linestyle, markersize=4, linewidth=1.6, label=name)
            ax.set_xscale("log", base=2)
            ax.set_xticks(all_n)
            ax.set_xticklabels([length_label(n) for n in all_n])
            ax.minorticks_off()
            ax.grid(True, which="major", alpha=0.3)
            ax.set_title(f"head_dim {hd}, {'causal' if causal else 'non-causal'}", fontsize=10)
            if c == 0:
                ax.set_ylabel("TFLOP/s")
            if r == len(causals) - 1:
                ax.set_xlabel("sequence length N")
    axes[0][0].set_ylim(bottom=0)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), frameon=False, fontsize=9)
    fig.suptitle(title(runs, dtype), fontsize=11)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
    print(f"wrote {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", help="flash_bench JSON files, one per flash backend")
    ap.add_argument("-o", "--out", required=True, help="output PNG path; '{dtype}' is replaced by the dtype")
    ap.add_argument("--dtypes", default="", help="comma-separated dtypes to plot (default: all in the files)")
    ap.add_argument("--labels", nargs="+", help="one legend label per file, e.g. 'flash (sm90)' 'flash (sm80)'")
    args = ap.parse_args()
    if args.labels and len(args.labels) != len(args.files):
        ap.error(f"--labels needs one label per file ({len(args.files)})")

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("bench/plot.py needs matplotlib, which is not installed. It is a development tool, not a "
                 "build dependency: python3 -m pip install matplotlib")

    runs = []
    for i, path in enumerate(args.files):
        ctx, rows = load(path)
        if not rows:
            sys.exit(f"{path}: no flash/standard rows with TFLOP/s (is it flash_bench JSON output?)")
        backend = flash_label(ctx)
        label = args.labels[i] if args.labels else f"flash ({backend})"
        runs.append({"ctx": ctx, "backend": backend, "label": label, "rows": rows})
    dtypes = sorted({k[1] for run in runs for k in run["rows"]})
    if args.dtypes:
        wanted = args.dtypes.split(",")
        missing = [d for d in wanted if d not in dtypes]
        if missing:
            sys.exit(f"no rows for dtype(s) {', '.join(missing)}; the files have {', '.join(dtypes)}")
        dtypes = wanted
    for dtype in dtypes:
        plot_dtype(plt, runs, dtype, output_path(args.out, dtype, len(dtypes)))


if __name__ == "__main__":
    main()
