#!/usr/bin/env python3
"""plot.py BENCH_LOG TORCH_LOG OUT.png [HIDDEN] - achieved bandwidth vs rows
for each implementation at one hidden size (default 3072), from the output
of `jitk bench` and bench/torch_baseline.py of the same run: the contract's
bytes (5 per element, 9 with the gated residual) over the one-launch time
after a clean L2 flush, with the device-to-device copy ceiling and a copy
of the same bytes for reference. Needs matplotlib (not on the GPU machine:
run it where the logs were fetched to)."""
import re
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402,F401

BENCH = re.compile(r"^((?:fused|split)(?: residual)? fp8)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+[\d.]+\s+[\d.]+"
                   r"\s+[\d.]+%\s+[\d.]+%\s+\d+(?:\s+([\d.]+)\s+([\d.]+))?\s*$")
TORCH = re.compile(r"^(.+?)\s+(fp8|residual_fp8)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s*$")


def main(bench_log, torch_log, out, hidden="3072"):
    hidden = int(hidden)
    series = {}  # (panel, label) -> {rows: GB/s}
    copy = None
    device = ""
    for line in open(bench_log):
        if line.startswith("device-to-device copy:"):
            copy = float(line.split()[2])
        if line.startswith("device:"):
            device = line.split(":", 1)[1].split("(")[0].strip()
        m = BENCH.match(line)
        if not m or int(m[2]) != hidden:
            continue
        residual = "residual" in m[1]
        panel = "residual" if residual else "plain"
        n = int(m[3]) * hidden
        per = 9 if residual else 5
        label = "jitk fused" if m[1].startswith("fused") else "jitk split (norm + quantizer)"
        series.setdefault((panel, label), {})[int(m[3])] = per * n / (float(m[4]) * 1e-6) / 1e9
        if m[6]:
            series.setdefault((panel, "copy of the same bytes"), {})[int(m[3])] = \
                per * n / (float(m[6]) * 1e-6) / 1e9
    for line in open(torch_log):
        m = TORCH.match(line.strip())
        if not m or int(m[3]) != hidden or m[1].startswith("jitk"):
            continue
        panel = "residual" if m[2] == "residual_fp8" else "plain"
        per = 9 if panel == "residual" else 5
        n = int(m[4]) * hidden
        series.setdefault((panel, "PyTorch " + m[1]), {})[int(m[4])] = per * n / (float(m[5]) * 1e-6) / 1e9
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), sharey=True)
    titles = {"plain": "LayerNorm + scale/shift + fp8", "residual": "gated residual + LayerNorm + scale/shift + fp8"}
    styles = {"jitk fused": ("o-", "C0"), "jitk split (norm + quantizer)": ("s--", "C1"),
              "copy of the same bytes": (":", "k"), "PyTorch torch.compile": ("^-", "C2"),
              "PyTorch eager": ("v-", "C3")}
    order = list(styles)
    for ax, panel in zip(axes, ("plain", "residual")):
        for label in order + sorted(set(l for p, l in series) - set(order)):
            pts = series.get((panel, label))
            if not pts:
                continue
            xs = sorted(pts)
            fmt, color = styles.get(label, (".-", None))
            ax.plot(xs, [pts[x] for x in xs], fmt, color=color, label=label)
        if copy:
            ax.axhline(copy, color="grey", lw=0.8)
            ax.text(0.02, copy * 1.01, f"2 GiB copy: {copy:.0f} GB/s", fontsize=8, color="grey",
                    transform=ax.get_yaxis_transform())
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.set_ylim(0, (copy or 4000) * 1.08)
        ax.set_xlabel(f"rows (hidden = {hidden})")
        ax.set_title(titles[panel], fontsize=10)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("GB/s (contract bytes / one-launch time, clean L2)")
    axes[0].legend(fontsize=8, loc="upper left", bbox_to_anchor=(0.0, 0.93))
    fig.suptitle(f"Achieved bandwidth vs rows, {device}", fontsize=11)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


if __name__ == "__main__":
    main(*sys.argv[1:])
