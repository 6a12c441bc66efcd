#!/usr/bin/env python3
"""sweep.py OUT.md - sweep the norm family's tuning on this GPU: for each
configuration, write a spec set whose tuning list is that configuration
(fused fp8 symbols allowed here), run `jitk bench --fused-only` at hidden
3072 (and the other sizes given), and tabulate. The winner goes into
specs/norm_scale_shift.yaml by hand, with the table in docs/performance.md."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = [
    # warps_per_row, rows_per_block, min_blocks, blocks_per_sm, prefetch, stages, walk
    (2, 1, 1, 16, 1, 0, 1), (2, 1, 1, 64, 1, 0, 2), (2, 1, 1, 64, 1, 0, 3), (2, 1, 1, 64, 1, 0, 4),
    (2, 1, 1, 32, 1, 0, 2), (4, 1, 1, 64, 0, 0, 1), (3, 1, 1, 5, 0, 3, 1),
]


def spec_for(cfg, vec_bytes=16):
    w, r, m, b, pf, st, walk = cfg
    src = open(os.path.join(ROOT, "specs/norm_scale_shift.yaml")).read()
    tuning = ("tuning:\n"
              f"  - vec_bytes: {vec_bytes}\n    warps_per_row: {w}\n    rows_per_block: {r}\n"
              f"    min_blocks: {m}\n    blocks_per_sm: {b}\n    prefetch: {pf}\n    stages: {st}\n"
              f"    walk: {walk}\n\n")
    src = re.sub(r"^tuning:\n(.*?)\n(?=derive:)", tuning, src, flags=re.S | re.M)
    src = src.replace("      - arch: { min: sm_100 }", "      - arch: { min: sm_90 }")
    src = src.replace("template: ../templates/", f"template: {ROOT}/templates/")
    q = open(os.path.join(ROOT, "specs/static_quant_fp8.yaml")).read()
    q = q.replace("template: ../templates/", f"template: {ROOT}/templates/")
    d = f"/tmp/sweep-{w}-{r}-{m}-{b}-{pf}-{st}-{walk}"
    os.makedirs(d, exist_ok=True)
    open(os.path.join(d, "norm_scale_shift.yaml"), "w").write(src)
    open(os.path.join(d, "static_quant_fp8.yaml"), "w").write(q)
    return d


def main(out, hidden="3072", rows="4096,16384"):
    lines = ["| warps/row | rows/block | min blocks | blocks/SM cap | prefetch | stages | walk | kernel | hidden | rows"
             " | us, clean L2 | % of copy | us, dirty L2 | % of copy | us, graph | same-size copy, clean / dirty |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for cfg in CONFIGS:
        d = spec_for(cfg)
        p = subprocess.run([os.path.join(ROOT, "build/jitk"), "bench", "--specs", d, "--hidden", hidden,
                            "--rows", rows, "--fused-only", "--skip-jit", "--reps", "100"],
                           capture_output=True, text=True, timeout=300)
        sys.stdout.write(p.stdout if os.environ.get("SWEEP_RAW") else "")
        if p.returncode:
            print(cfg, "FAILED", p.stderr.strip()[-300:], flush=True)
            continue
        for line in p.stdout.splitlines():
            m = re.match(r"(fused(?: residual)? fp8)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+[\d.]+\s+([\d.]+)"
                         r"\s+([\d.]+)%\s+([\d.]+)%\s+\d+\s+([\d.]+)\s+([\d.]+)", line)
            if m:
                row = (f"| {' | '.join(map(str, cfg))} | {m[1]} | {m[2]} | {m[3]} | {m[4]} | {m[7]} | {m[5]} |"
                       f" {m[8]} | {m[6]} | {m[9]} / {m[10]} |")
                lines.append(row)
                print(row, flush=True)
    open(out, "w").write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
