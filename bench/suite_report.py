#!/usr/bin/env python3
"""Turns bench/suite.sh's results into suite.json, a Markdown table of ratios (ctxkit / ONNX Runtime) and an SVG
chart of the 1-thread run-time ratios. usage: suite_report.py RESULTS.jsonl OUT_DIR"""
import json
import math
import sys


def geomean(values):
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def main():
    results = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    out = sys.argv[2]
    rows = []
    for r in results:
        c1, c2 = r["ctxkit_t1"], r["ctxkit_t2"]
        o1, o2, o2s = r["ort_t1_spin0"], r["ort_t2_spin0"], r["ort_t2_spin1"]
        rows.append({
            "model": r["model"],
            "ctxkit_load_ms": c1["load_ms"], "ort_session_ms": o1["load_ms"],
            "load_ratio": c1["load_ms"] / o1["load_ms"],
            "ctxkit_first_ms": c1["first_run_ms"], "ort_first_ms": o1["first_run_ms"],
            # Time to first result: load (session creation) plus the first run, and the first run over the steady one.
            "first_result_ratio": (c1["load_ms"] + c1["first_run_ms"]) / (o1["load_ms"] + o1["first_run_ms"]),
            "ctxkit_first_over_steady": c1["first_run_ms"] / c1["median_ms"],
            "ort_first_over_steady": o1["first_run_ms"] / o1["median_ms"],
            "ctxkit_t1_ms": c1["median_ms"], "ort_t1_ms": o1["median_ms"], "run_ratio_t1": c1["median_ms"] / o1["median_ms"],
            "ctxkit_t1_p90_ms": c1["p90_ms"], "ort_t1_p90_ms": o1["p90_ms"],
            "ctxkit_t2_ms": c2["median_ms"], "ort_t2_ms": o2["median_ms"], "ort_t2_spin_ms": o2s["median_ms"],
            "run_ratio_t2": c2["median_ms"] / o2["median_ms"],
            "ctxkit_2t_speedup": c1["median_ms"] / c2["median_ms"],
            "ctxkit_peak_mb": r["ctxkit_t1_peak_kb"] / 1024, "ort_peak_mb": r["ort_t1_spin0_peak_kb"] / 1024,
            "two_sessions_peak_mb": r["ctxkit_two_sessions_peak_kb"] / 1024,
            "second_session_load_ms": r["ctxkit_two_sessions"]["sessions"]["extra_load_ms"][0],
        })
    summary = {
        "geomean_run_ratio_t1": geomean([r["run_ratio_t1"] for r in rows]),
        "geomean_run_ratio_t2": geomean([r["run_ratio_t2"] for r in rows]),
        "geomean_load_speedup": 1 / geomean([r["load_ratio"] for r in rows]),
        "geomean_first_result_speedup": 1 / geomean([r["first_result_ratio"] for r in rows]),
        "max_ctxkit_first_over_steady": max(r["ctxkit_first_over_steady"] for r in rows),
        "max_run_ratio_t1": max(r["run_ratio_t1"] for r in rows),
        "geomean_second_session_speedup": 1 / geomean([r["second_session_load_ms"] / r["ort_session_ms"] for r in rows]),
    }
    json.dump({"rows": rows, "summary": summary}, open(f"{out}/suite.json", "w"), indent=2)

    md = ["| model | load ctxkit / ORT session (ms) | first run (ms) | load + first run ratio | first / median "
          "ctxkit, ORT | median 1 thread ctxkit / ORT (ms) | ratio | "
          "p90 1 thread (ms) | median 2 threads ctxkit / ORT / ORT spinning (ms) | ratio | ctxkit 2t speedup | "
          "peak MB ctxkit / ORT (node) | 2 sessions: 2nd load ms, MB |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        md.append(
            f"| {r['model']} | {r['ctxkit_load_ms']:.2f} / {r['ort_session_ms']:.1f} | {r['ctxkit_first_ms']:.3f} / "
            f"{r['ort_first_ms']:.3f} | {r['first_result_ratio']:.2f} | {r['ctxkit_first_over_steady']:.2f}, "
            f"{r['ort_first_over_steady']:.2f} | {r['ctxkit_t1_ms']:.3f} / {r['ort_t1_ms']:.3f} | {r['run_ratio_t1']:.2f} | "
            f"{r['ctxkit_t1_p90_ms']:.3f} / {r['ort_t1_p90_ms']:.3f} | {r['ctxkit_t2_ms']:.3f} / {r['ort_t2_ms']:.3f} / "
            f"{r['ort_t2_spin_ms']:.3f} | {r['run_ratio_t2']:.2f} | {r['ctxkit_2t_speedup']:.2f} | "
            f"{r['ctxkit_peak_mb']:.0f} / {r['ort_peak_mb']:.0f} | {r['second_session_load_ms']:.3f}, "
            f"{r['two_sessions_peak_mb']:.0f} |")
    md.append("")
    md.append(f"Geomean run-time ratio ctxkit / ORT: {summary['geomean_run_ratio_t1']:.2f} at 1 thread, "
              f"{summary['geomean_run_ratio_t2']:.2f} at 2 threads (max {summary['max_run_ratio_t1']:.2f} at 1 thread); "
              f"session-ready {summary['geomean_load_speedup']:.0f}x faster than ORT's session creation (geomean), a second "
              f"session on the same .bin {summary['geomean_second_session_speedup']:.0f}x; load + first run "
              f"{summary['geomean_first_result_speedup']:.1f}x faster than ORT's session creation + first run (geomean), "
              f"ctxkit's first run at most {summary['max_ctxkit_first_over_steady']:.2f}x its median. "
              "ORT's peak includes Node.js (about 40 MB).")
    open(f"{out}/suite.md", "w").write("\n".join(md) + "\n")

    # A bar per model: the 1-thread run-time ratio, with the 1.0 line.
    width, bar, gap, left = 760, 18, 8, 190
    height = 40 + len(rows) * (bar + gap)
    scale = (width - left - 40) / max(2.0, max(r["run_ratio_t1"] for r in rows) * 1.1)
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">',
           f'<text x="10" y="18" font-size="14">run time ctxkit / ONNX Runtime 1.30, 1 thread (lower is faster)</text>']
    for i, r in enumerate(rows):
        y = 30 + i * (bar + gap)
        w = r["run_ratio_t1"] * scale
        color = "#3a7" if r["run_ratio_t1"] <= 1.0 else "#d64"
        svg.append(f'<text x="{left - 8}" y="{y + 13}" text-anchor="end">{r["model"]}</text>')
        svg.append(f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar}" fill="{color}"/>')
        svg.append(f'<text x="{left + w + 4:.1f}" y="{y + 13}">{r["run_ratio_t1"]:.2f}</text>')
    x1 = left + scale
    svg.append(f'<line x1="{x1:.1f}" y1="26" x2="{x1:.1f}" y2="{height - 6}" stroke="#333" stroke-dasharray="4 3"/>')
    svg.append("</svg>")
    open(f"{out}/suite.svg", "w").write("\n".join(svg) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
