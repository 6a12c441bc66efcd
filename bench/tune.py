#!/usr/bin/env python3
"""tune.py SET [BUILD] - time tuning variants of one family on this GPU.
tune.py --check [BUILD] - without a GPU: every variant's specs load and compile.
tune.py --specs-with FILE DIR - a copy of specs/ under DIR (its path printed) whose
gemm_fp8.yaml is FILE: the spec --write wrote, to check and time as shipped.

Each variant is the shipped spec set with one spec changed: an entry
appended to its tuning list (later entries override earlier ones) and,
where the variant says, a line replaced (the launch grid). Tuning keys
never change the bytes a kernel writes (the templates' reduction order
does not depend on them; the GPU tests compare every instance with its
split path), only its speed. For each variant the set's benchmark runs
with JITK_SPECS naming the variant's directory, and the lines it names
are printed under the variant's label. The winner goes into specs/ by
hand, with the table in docs/performance.md.

tune.py gemm [BUILD] [--write FILE] [--only REGEX] [--cache DIR] - the FP8 GEMM's tile
configurations and the scheduler's swizzle and raster order per size
class (the spec's M and N classes: M <= 512 with N <= 3072, N <= 9216 or
N > 9216, M > 512; --only: the variants whose label matches, beside the
shipped one): every variant's instances are precompiled at once into one
cache (an instance a variant leaves as shipped is one key, compiled
once), then each is timed by `jitk bench --family gemm_fp8` (the block's
eight shapes and the MLP's bias and GELU cases, L2 flushed). An M <= 512
variant tunes both N classes and is a candidate in each; the winner of a
class is the candidate with the least total time over the class's
shapes. --write FILE writes specs/gemm_fp8.yaml with each class's winner
appended to its tuning list under the class's own `when`, for sm_90 (what
was timed) only: what goes into specs/ once reviewed. --cache DIR: the
variants' cache, kept (a check of the written spec then finds the
winners' instances there); else a temporary one, removed.

Sets:
  q_only  the norm family's outputs-q instances (jitk bench --family axes)
  qk      QK-RMSNorm + RoPE in place (jitk bench --family qk)
  gemm    gemm_fp8's tiles and clusters, per size class (jitk bench --family gemm_fp8)
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

def tiles(cls, tm, tn, cm, cn, pingpong=False, only=None, splits=1, stream_k=False):
    """A GEMM variant: one class's tile and cluster (ping-pong or
    cooperative; split-K in splits when more than 1, stream-K), for every
    epilogue or only one (label, entry, [])."""
    where = ("M<=512" if cls == "512" else "M>512") + (", GELU only" if only else "")
    when = f"mclass: [{cls}]" + (f", epilogue: [{only}]" if only else "")
    return (f"{where}: {'ping-pong ' if pingpong else ''}{tm}x{tn} c{cm}x{cn}" +
            (f" split-K {splits}" if splits > 1 else "") + (" stream-K" if stream_k else ""),
            f"  - when: {{ {when} }}\n" + ("    schedule: 1\n" if pingpong else "") +
            f"    tile_m: {tm}\n    tile_n: {tn}\n    cluster_m: {cm}\n    cluster_n: {cn}\n" +
            (f"    scheduler: 1\n    splits: {splits}\n" if splits > 1 or stream_k else ""), [])


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
    # Cooperative, no fast accumulation (the contract's promotion): the
    # accumulator and its promotion copy must fit 255 registers, which
    # rules out 64 x 256 or 128 x 128 per consumer warp group.
    "gemm": {
        "spec": "gemm_fp8.yaml",
        "check": "gemm_fp8",
        # (a selector may leave a parameter out: each of these names its M
        # class's instances of both N classes)
        "precompile": ["gemm_fp8[mclass=512]", "gemm_fp8[mclass=65536]",
                       "gemm_fp8_bias[mclass=65536]", "gemm_fp8_gelu_tanh_fp8[mclass=65536]"],
        "bench": ["jitk", "bench", "--family", "gemm_fp8", "--reps", "50"],
        "lines": r"^gemm_fp8",
        # the winner: the least total over the plain GEMM's shapes (the
        # MLP's bias and GELU lines are printed beside them)
        "total": r"^gemm_fp8 ",
        # the spec's size classes (mclass, nclass): the shapes each holds,
        # and the tuning entry's `when` that reaches its instances only
        "classes": {
            "M<=512, N<=3072": (lambda m, n: m <= 512 and n <= 3072, {"mclass": "512", "nclass": "3072"}),
            "M<=512, N<=9216": (lambda m, n: m <= 512 and 3072 < n <= 9216, {"mclass": "512", "nclass": "9216"}),
            "M<=512, N>9216": (lambda m, n: m <= 512 and n > 9216, {"mclass": "512", "nclass": "65536"}),
            "M>512": (lambda m, n: m > 512, {"mclass": "65536"}),
        },
        "variants": [
            ("shipped", None, []),
        ] + [
            tiles(*t) for t in [
                ("512", 128, 192, 1, 1), ("512", 128, 128, 2, 1), ("512", 128, 128, 1, 1),
                ("512", 128, 64, 1, 2), ("512", 128, 64, 1, 1), ("512", 128, 96, 1, 2),
                ("512", 128, 128, 1, 2),
                # both operands multicast (2 x 2): a quarter of A and of B
                # per CTA from L2, where M = 512's tiles are L2-bound
                ("512", 128, 96, 2, 2), ("512", 128, 128, 2, 2), ("512", 128, 64, 2, 2),
                ("512", 128, 192, 2, 1), ("512", 128, 192, 1, 2),
                # B multicast over the four 128-row tiles of M = 512 (4 x 1),
                # and A over pairs too (4 x 2): each B tile leaves L2 once
                ("512", 128, 96, 4, 1), ("512", 128, 128, 4, 1), ("512", 128, 96, 4, 2),
                # 144 columns: cuBLAS's tile at 512 x 9216 (two waves of
                # 128 x 144 tiles on 132 SMs where 128 x 96 takes three)
                ("512", 128, 144, 2, 1), ("512", 128, 144, 1, 2), ("512", 128, 144, 1, 1),
                ("65536", 128, 192, 2, 1), ("65536", 128, 192, 1, 2), ("65536", 128, 128, 2, 1),
                ("65536", 128, 128, 1, 2), ("65536", 256, 64, 1, 1), ("65536", 128, 160, 1, 1),
                ("65536", 128, 160, 2, 1),
            ]
        ] + [
            # ping-pong: each consumer warp group takes a tile of its own,
            # and its epilogue overlaps the other's mainloop. 64-row tiles
            # fetch B once per 64 rows; a 128 x 96 tile's accumulators and
            # their promotion copy take 192 registers of a warp group, as
            # a cooperative 128 x 192 tile's do
            tiles(*t, pingpong=True) for t in [
                ("512", 64, 96, 1, 1), ("512", 64, 128, 1, 1), ("512", 64, 192, 1, 1),
                ("512", 64, 128, 1, 2), ("512", 64, 192, 1, 2), ("65536", 64, 128, 1, 1),
                ("65536", 64, 192, 1, 1), ("65536", 64, 128, 2, 1), ("65536", 64, 192, 2, 1),
                ("65536", 64, 224, 1, 1),
                ("65536", 128, 96, 1, 1), ("65536", 128, 96, 2, 1), ("65536", 128, 96, 1, 2),
                ("512", 128, 96, 1, 2),
            ]
        ] + [
            # split-K: the M = 512 tiles L2 holds best (128 x 192, B
            # multicast over pairs of M tiles; 128 x 128) in 2 to 4 slices
            # of K, so that N = 3072's 64 tiles fill the SMs. Each slice's
            # fp32 partial sums pass through the runtime's scratch (a
            # different order of additions from the unsplit kernel: its
            # bytes are checked apart, bench/gemm_check.py)
            tiles(c, tm, tn, cm, cn, splits=sp) for c, tm, tn, cm, cn, sp in [
                ("512", 128, 192, 2, 1, 2), ("512", 128, 192, 1, 1, 2), ("512", 128, 128, 2, 1, 2),
                ("512", 128, 192, 2, 1, 3), ("512", 128, 96, 1, 2, 2), ("512", 128, 192, 2, 1, 4),
            ]
        ] + [
            # stream-K (splits 1): N = 9216's 192 tiles of 128 x 192 make 1.45
            # waves on 132 SMs; their K iterations spread evenly instead
            tiles(c, tm, tn, cm, cn, stream_k=True) for c, tm, tn, cm, cn in [
                ("512", 128, 192, 2, 1), ("512", 128, 192, 1, 1), ("512", 128, 144, 1, 2),
            ]
        ] + [
            # the same for the MLP's GELU epilogue alone, whose tanhf runs
            # after each tile's mainloop in the cooperative kernel (about
            # 45 us of 296 at 4096 x 12288 x 3072): no class's candidate
            # (the plain GEMM decides a class), its gelu line printed
            tiles("65536", 128, 96, cm, cn, pingpong=True, only="gelu_tanh_fp8")
            for cm, cn in [(1, 1), (2, 1)]
        ] + [
            # the persistent scheduler's walk over the tiles: which
            # operand's tiles stay in L2 while the other streams
            (f"{'M<=512' if c == '512' else 'M>512'}: swizzle {sw} raster {ra}",
             f"  - when: {{ mclass: [{c}] }}\n    swizzle: {sw}\n    raster: {ra}\n", [])
            for c, sw, ra in [
                ("65536", 2, 0), ("65536", 4, 0), ("65536", 8, 0), ("65536", 1, 1),
                ("65536", 1, 2), ("65536", 4, 1), ("65536", 4, 2), ("512", 2, 0), ("512", 1, 2),
            ]
        ],
    },
}


def variant_dir(base, spec, entry, repl, whole=None):
    """A copy of specs/ (templates referred to by absolute path) with spec
    changed: entry appended to its tuning, the lines repl names replaced,
    or (whole) the spec replaced by that file's text."""
    d = tempfile.mkdtemp(prefix="jitk-tune-", dir=base)
    for name in os.listdir(os.path.join(ROOT, "specs")):
        if not name.endswith(".yaml"):
            continue
        src = open(whole if whole and name == spec else os.path.join(ROOT, "specs", name)).read()
        src = src.replace("template: ../templates/", f"template: {ROOT}/templates/")
        src = src.replace("path: ../templates/", f"path: {ROOT}/templates/")  # packages.yaml
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
    instance for sm_90 (no GPU needed; the gemm set's are explained, not
    compiled): the rewrites still match the shipped specs."""
    base = tempfile.mkdtemp(prefix="jitk-tune-")
    bad = 0
    try:
        for name, s in SETS.items():
            for label, entry, repl in s["variants"]:
                d = variant_dir(base, s["spec"], entry, repl)
                # a CUTLASS instance takes a minute of NVRTC: explain checks
                # what the spec decides (tuning, boxes, gates) without it
                cmd = (["explain", s["check"], "--arch", "sm_90a"] if "classes" in s else
                       ["precompile", s["check"], "--arch", "sm_90", "--cache",
                        os.path.join(d, "cache"), "-j", "1"])
                p = subprocess.run([os.path.join(build, "jitk"), *cmd, "--specs", d],
                                   capture_output=True, text=True, timeout=300)
                if p.returncode:
                    bad += 1
                    print(f"tune.py: {name} / {label}: {(p.stderr or p.stdout).strip()[-300:]}")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"tune.py --check: {sum(len(s['variants']) for s in SETS.values())} variants, {bad} failed")
    return 1 if bad else 0


def entry_when(entry):
    """A tuning entry's `when`: {param: "value"}, one value each (a class
    is one value of each size class); {} without one."""
    m = re.search(r"when: \{([^}]*)\}", entry or "")
    if not m:
        return {}
    pairs = re.findall(r"(\w+): \[(\w+)\]", m.group(1))
    if re.sub(r"(\w+): \[(\w+)\]", "", m.group(1)).strip(" ,") or not pairs:
        raise SystemExit(f"tune.py: a variant's when takes one value per name: {m.group(0)}")
    return dict(pairs)


def covers(entry, when):
    """Whether a variant's entry reaches every instance of a class (its
    `when` names a subset of the class's values; none: every class): an
    M <= 512 entry tunes both N classes, and is a candidate in each."""
    return all(when.get(k) == v for k, v in entry_when(entry).items())


def class_entry(entry, when):
    """The variant's entry under the class's own `when` (in place of its
    own, or added): what the winner of that class adds to the spec."""
    w = "when: { " + ", ".join(f"{k}: [{v}]" for k, v in when.items()) + " }"
    if re.search(r"when: \{[^}]*\}", entry):
        return re.sub(r"when: \{[^}]*\}", w, entry, count=1)
    assert entry.startswith("  - "), entry
    return f"  - {w}\n    " + entry[4:]


def tune_classes(s, build, write, keep=None):
    """The gemm set: precompile every variant at once into one cache (keep:
    that directory, left in place, else a temporary one), time each, pick
    the winner per class, optionally write the spec."""
    base = tempfile.mkdtemp(prefix="jitk-tune-")
    cache = keep or os.path.join(base, "cache")
    jitk = os.path.join(build, "jitk")
    failed = 0
    try:
        dirs = [(label, entry, variant_dir(base, s["spec"], entry, repl))
                for label, entry, repl in s["variants"]]
        jobs = max(1, (os.cpu_count() or 2))
        procs = []
        for label, entry, d in dirs:
            procs.append((label, subprocess.Popen(
                [jitk, "precompile", *s["precompile"], "--specs", d, "--arch", "sm_90",
                 "--cache", cache, "-j", "1"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                text=True)))
            while sum(p.poll() is None for _, p in procs) >= jobs:
                procs[[p.poll() is None for _, p in procs].index(True)][1].wait()
        bad = set()
        for label, p in procs:
            out = p.communicate()[0]
            print(f"# precompile {label}: rc={p.returncode} {out.strip().splitlines()[-1] if out.strip() else ''}",
                  flush=True)
            if p.returncode:
                bad.add(label)
        totals = {}
        for label, entry, d in dirs:
            print(f"## {label}", flush=True)
            if label in bad:
                failed += 1
                print("FAILED: did not compile", flush=True)
                continue
            env = dict(os.environ, JITK_CACHE_DIR=cache, JITK_SPECS=d)
            p = subprocess.run([os.path.join(build, s["bench"][0])] + s["bench"][1:],
                               capture_output=True, text=True, timeout=400, env=env)
            if p.returncode:
                failed += 1
                print("FAILED:", (p.stderr or p.stdout).strip()[-400:], flush=True)
                continue
            for line in p.stdout.splitlines():
                if not re.search(s["lines"], line):
                    continue
                print(line, flush=True)
                if not re.search(s.get("total", s["lines"]), line):
                    continue
                m = re.search(r"\ba\[(\d+),\d+\] b\[(\d+),", line)
                us = float(line.split()[-5 if line.rstrip().endswith("%") else -4])
                for cls, (holds, _) in s["classes"].items():
                    if m and holds(int(m.group(1)), int(m.group(2))):
                        totals.setdefault(cls, {}).setdefault(label, []).append(us)
        winners = {}
        entries = {l: e for l, e, _ in dirs}
        for cls, by in totals.items():
            full = {k: sum(v) for k, v in by.items() if len(v) == max(map(len, by.values()))}
            # a variant that tunes another class runs this class as shipped
            when = s["classes"][cls][1]
            cands = {k: v for k, v in full.items() if k == "shipped" or covers(entries[k], when)}
            best = min(cands, key=cands.get)
            winners[cls] = best
            print(f"# class {cls}: winner {best} ({cands[best]:.1f} us over its shapes; "
                  f"shipped {cands.get('shipped', float('nan')):.1f})", flush=True)
        if write:
            src = open(os.path.join(ROOT, "specs", s["spec"])).read()
            # each class's winner under the class's own `when`, for sm_90
            # (what was compiled and timed) only
            add = "".join("  - arch: { max: sm_90 }\n    " + class_entry(entries[w], s["classes"][c][1])[4:]
                          for c, w in sorted(winners.items()) if w != "shipped")
            if add:
                m = re.search(r"^tuning:\n(?:(?:[ #].*)?\n)*", src, flags=re.M)
                src = src[:m.end()] + "  # bench/tune.py gemm's winners\n" + add + src[m.end():]
            open(write, "w").write(src)
            print(f"# wrote {write}", flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 1 if failed else 0


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "--check":
        sys.exit(check(sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "build")))
    if len(sys.argv) == 4 and sys.argv[1] == "--specs-with":
        # a spec directory whose gemm_fp8.yaml is FILE (what --write wrote)
        base = os.path.abspath(sys.argv[3])
        os.makedirs(base, exist_ok=True)
        print(variant_dir(base, SETS["gemm"]["spec"], None, [], whole=sys.argv[2]))
        return
    if len(sys.argv) < 2 or sys.argv[1] not in SETS:
        raise SystemExit(__doc__)
    s = SETS[sys.argv[1]]
    for _, entry, _ in s["variants"]:
        entry_when(entry)  # a malformed when stops here, before any compile
    args = sys.argv[2:]
    write = None
    if "--write" in args:
        i = args.index("--write")
        if i + 1 >= len(args):
            raise SystemExit("tune.py: --write needs a file")
        write = args[i + 1]
        del args[i:i + 2]
    keep = None
    if "--cache" in args:
        i = args.index("--cache")
        if i + 1 >= len(args):
            raise SystemExit("tune.py: --cache needs a directory")
        keep = os.path.abspath(args[i + 1])
        del args[i:i + 2]
    if "--only" in args:
        i = args.index("--only")
        if i + 1 >= len(args):
            raise SystemExit("tune.py: --only needs a regular expression")
        only = re.compile(args[i + 1])
        del args[i:i + 2]
        s = dict(s, variants=[v for v in s["variants"] if v[0] == "shipped" or only.search(v[0])])
    build = args[0] if args else os.path.join(ROOT, "build")
    if not os.access(os.path.join(build, "jitk"), os.X_OK):
        raise SystemExit(f"tune.py: no jitk in {build} (build it, or name the build directory)")
    if "classes" in s:
        sys.exit(tune_classes(s, build, write, keep))
    if keep or write:
        raise SystemExit("tune.py: --cache and --write are for the gemm set (its classes)")
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
