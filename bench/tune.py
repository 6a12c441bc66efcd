#!/usr/bin/env python3
"""tune.py SET [BUILD] - time tuning variants of one family on this GPU.
tune.py --check [BUILD] - without a GPU: every variant's specs load and compile.

Each variant is the shipped spec set with one spec changed: an entry
appended to its tuning list (later entries override earlier ones) and,
where the variant says, a line replaced (the launch grid). Tuning keys
never change the bytes a kernel writes (the templates' reduction order
does not depend on them; the GPU tests compare every instance with its
split path), only its speed. For each variant the set's benchmark runs
with JITK_SPECS naming the variant's directory, and the lines it names
are printed under the variant's label. The winner goes into specs/ by
hand, with the table in docs/performance.md.

Sets:
  q_only  the norm family's outputs-q instances (jitk bench --family axes)
  qk      QK-RMSNorm + RoPE in place (jitk bench --family qk)
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (label, tuning entry appended, [(old line, new line)])
SETS = {
    "q_only": {
        "spec": "norm_scale_shift.yaml",
        "check": "fused_norm_scale_shift_fp8_q_only[hidden=3072]",
        "bench": ["jitk", "bench", "--family", "axes", "--rows", "4096,16384", "--reps", "100"],
        "lines": r"q only|^shared fp8|outputs q vs",
        "variants": [
            ("shipped", None, []),
            ("q: min_blocks 8", "  - when: { outputs: q }\n    min_blocks: 8\n", []),
            ("q: min_blocks 10", "  - when: { outputs: q }\n    min_blocks: 10\n", []),
            ("q: walk 4", "  - when: { outputs: q }\n    walk: 4\n", []),
            ("q: min_blocks 8, walk 4", "  - when: { outputs: q }\n    min_blocks: 8\n    walk: 4\n", []),
        ],
    },
    "qk": {
        "spec": "qk_norm_rope.yaml",
        "check": "qk_norm_rope",
        "bench": ["jitk", "bench", "--family", "qk", "--reps", "100"],
        "lines": r"^N |^4096|^16384|^4096\+512|^4608",
        "variants": [
            ("shipped", None, []),
            ("threads 192, items 4", "  - threads: 192\n    items: 4\n", []),
            ("min_blocks 8", "  - min_blocks: 8\n", []),
            ("threads 384, items 2, min_blocks 3", "  - threads: 384\n    items: 2\n    min_blocks: 3\n", []),
            ("threads 192, items 4, min_blocks 6", "  - threads: 192\n    items: 4\n    min_blocks: 6\n", []),
            ("threads 192, items 4, min_blocks 5", "  - threads: 192\n    items: 4\n    min_blocks: 5\n", []),
            ("grid 16/SM", "  - blocks_per_sm: 16\n",
             [("  grid: tokens", "  grid: min(tokens, sm_count * blocks_per_sm)")]),
            ("grid 8/SM, min_blocks 8", "  - blocks_per_sm: 8\n    min_blocks: 8\n",
             [("  grid: tokens", "  grid: min(tokens, sm_count * blocks_per_sm)")]),
        ],
    },
}


def variant_dir(base, spec, entry, repl):
    """A copy of specs/ (templates referred to by absolute path) with spec
    changed."""
    d = tempfile.mkdtemp(prefix="jitk-tune-", dir=base)
    for name in os.listdir(os.path.join(ROOT, "specs")):
        if not name.endswith(".yaml"):
            continue
        src = open(os.path.join(ROOT, "specs", name)).read()
        src = src.replace("template: ../templates/", f"template: {ROOT}/templates/")
        if name == spec:
            if entry:
                # the tuning list ends where the next top-level key begins
                m = re.search(r"^tuning:\n(?:(?:[ #].*)?\n)*", src, flags=re.M)
                if not m:
                    raise SystemExit(f"tune.py: no tuning list in {name}")
                src = src[:m.end()] + entry + src[m.end():]
            for old, new in repl:
                if old not in src:
                    raise SystemExit(f"tune.py: {name} has no line {old!r}")
                src = src.replace(old, new, 1)
        open(os.path.join(d, name), "w").write(src)
    return d


def check(build):
    """Every variant's spec set loads and compiles its changed spec's first
    instance for sm_90 (no GPU needed): the rewrites still match the
    shipped specs."""
    base = tempfile.mkdtemp(prefix="jitk-tune-")
    bad = 0
    try:
        for name, s in SETS.items():
            for label, entry, repl in s["variants"]:
                d = variant_dir(base, s["spec"], entry, repl)
                p = subprocess.run([os.path.join(build, "jitk"), "precompile", s["check"],
                                    "--specs", d, "--arch", "sm_90", "--cache",
                                    os.path.join(d, "cache"), "-j", "1"],
                                   capture_output=True, text=True, timeout=300)
                if p.returncode:
                    bad += 1
                    print(f"tune.py: {name} / {label}: {(p.stderr or p.stdout).strip()[-300:]}")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"tune.py --check: {sum(len(s['variants']) for s in SETS.values())} variants, {bad} failed")
    return 1 if bad else 0


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "--check":
        sys.exit(check(sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "build")))
    if len(sys.argv) < 2 or sys.argv[1] not in SETS:
        raise SystemExit(__doc__)
    s = SETS[sys.argv[1]]
    build = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "build")
    base = tempfile.mkdtemp(prefix="jitk-tune-")
    failed = 0
    try:
        for label, entry, repl in s["variants"]:
            d = variant_dir(base, s["spec"], entry, repl)
            cache = tempfile.mkdtemp(prefix="cache-", dir=base)
            env = dict(os.environ, JITK_CACHE_DIR=cache, JITK_SPECS=d)
            p = subprocess.run([os.path.join(build, s["bench"][0])] + s["bench"][1:],
                               capture_output=True, text=True, timeout=400, env=env)
            print(f"## {label}", flush=True)
            if p.returncode:
                failed += 1
                print("FAILED:", (p.stderr or p.stdout).strip()[-400:], flush=True)
                continue
            for line in p.stdout.splitlines():
                if re.search(s["lines"], line):
                    print(line, flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
