#!/usr/bin/env python3
"""report.py RESULTS_DIR [DOC] - write the measured tables of
docs/performance.md (or DOC) from one run's logs (bench/results/DATE:
bench.log, bench_plot.log, torch.log, nvrtc.log), between the document's
<!-- report:NAME --> and <!-- /report:NAME --> markers, and redraw the
bandwidth plot next to it when matplotlib is there. The prose around the
tables is written by hand."""
import os
import re
import sys

ROW = re.compile(r"^((?:fused|split)(?: residual)? fp8)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)"
                 r"\s+([\d.]+)%\s+([\d.]+)%\s+(\d+)(?:\s+([\d.]+)\s+([\d.]+))?\s*$")
TORCH = re.compile(r"^(.+?)\s+(fp8|residual_fp8)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s*$")


def read(path):
    return open(path).read().splitlines() if os.path.exists(path) else []


def kernels(lines):
    out = ["| kernel | hidden | rows | us, clean L2 | us, dirty L2 | us, idle GPU | us, in a graph"
           " | % of copy (clean) | % of copy (dirty) | same-bytes copy, clean / dirty |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for line in lines:
        m = ROW.match(line)
        if m:
            copy = f"{m[11]} / {m[12]}" if m[11] else "-"
            out.append(f"| {m[1]} | {m[2]} | {m[3]} | {m[4]} | {m[5]} | {m[6]} | {m[7]} | {m[8]} | {m[9]} | {copy} |")
    return out


def regex_table(lines, columns, pattern, cells):
    """A markdown table of COLUMNS, a row per line matching PATTERN."""
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for line in lines:
        m = re.match(pattern, line)
        if m:
            out.append("| " + " | ".join(cells(m)) + " |")
    return out


def fusion(lines):
    return regex_table(lines, ["kernel", "hidden", "rows", "split / fused, clean L2", "dirty L2"],
                       r"^\s+(fused(?: residual)? fp8)\s+H=(\d+)\s+rows=(\d+)\s+([\d.]+)x / ([\d.]+)x",
                       lambda m: [m[1], m[2], m[3], m[4] + "x", m[5] + "x"])


def alternatives(torch_lines, bench_lines):
    c = {}
    for line in bench_lines:
        m = ROW.match(line)
        if m and m[1].startswith("fused"):
            c[("residual_fp8" if "residual" in m[1] else "fp8", int(m[2]), int(m[3]))] = (float(m[4]), float(m[5]))
    rows = {}
    for line in torch_lines:
        m = TORCH.match(line.strip())
        if m:
            rows.setdefault((m[2], int(m[3]), int(m[4])), {})[m[1]] = (float(m[5]), float(m[6]))
    out = ["| kernel | hidden | rows | jitk (C), us | jitk (Python), us | torch.compile, us | eager, us"
           " | torch.compile / jitk | eager / jitk |", "|---|---|---|---|---|---|---|---|---|"]
    for key in sorted(rows, key=lambda k: (k[0], k[1], k[2])):
        r = rows[key]
        jc = c.get(key)
        jp, tc, ea = r.get("jitk (python)"), r.get("torch.compile"), r.get("eager")

        def f(v):
            return f"{v[0]:.2f} / {v[1]:.2f}" if v else "-"

        def ratio(v):
            return f"{v[0] / jc[0]:.2f}x / {v[1] / jc[1]:.2f}x" if v and jc else "-"
        out.append(f"| {key[0]} | {key[1]} | {key[2]} | {f(jc)} | {f(jp)} | {f(tc)} | {f(ea)} | {ratio(tc)} | {ratio(ea)} |")
    out.append("")
    out.append("Each cell: clean L2 / dirty L2 (microseconds, or ratios of them).")
    return out


def jit(lines):
    keep = [ln for ln in lines if re.match(r"^(cold|warm) first use|^hot path", ln)]
    return ["    " + ln for ln in keep]


def nvrtc(lines):
    return regex_table(lines, ["translation unit", "first compile in a process, ms", "later compiles, ms (median)"],
                       r"^(.+?)\s+first\s+([\d.]+) ms, then\s+([\d.]+) ms", lambda m: [m[1], m[2], m[3]])


def splice(doc, name, body):
    start, end = f"<!-- report:{name} -->", f"<!-- /report:{name} -->"
    if start not in doc:
        return doc
    a = doc.index(start) + len(start)
    b = doc.index(end)
    return doc[:a] + "\n" + "\n".join(body) + "\n" + doc[b:]


def main(results, doc_path=None):
    doc_path = doc_path or os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                        "docs", "performance.md")
    bench = read(os.path.join(results, "bench.log"))
    plot = read(os.path.join(results, "bench_plot.log"))
    torch = read(os.path.join(results, "torch.log"))
    doc = open(doc_path).read()
    copy = next((ln for ln in bench if ln.startswith("device-to-device copy")), "")
    device = next((ln for ln in bench if ln.startswith("device:")), "")
    doc = splice(doc, "ceiling", ["    " + device, "    " + copy])
    doc = splice(doc, "kernels", kernels(bench))
    doc = splice(doc, "plotrows", kernels(plot))
    doc = splice(doc, "fusion", fusion(bench))
    doc = splice(doc, "alternatives", alternatives(torch, plot + bench))
    doc = splice(doc, "jit", jit(bench))
    doc = splice(doc, "nvrtc", nvrtc(read(os.path.join(results, "nvrtc.log"))))
    open(doc_path, "w").write(doc)
    print(f"wrote {doc_path}")
    try:
        import plot as plotter
    except ImportError:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        try:
            import plot as plotter
        except ImportError as e:  # matplotlib missing
            print(f"no plot: {e}")
            return
    png = os.path.join(os.path.dirname(doc_path), "img", "bandwidth-h200.png")
    os.makedirs(os.path.dirname(png), exist_ok=True)
    plotter.main(os.path.join(results, "bench_plot.log"), os.path.join(results, "torch.log"), png)


if __name__ == "__main__":
    main(*sys.argv[1:])
