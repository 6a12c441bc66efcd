"""python -m jitk: the jitk command's list, explain and precompile, through
the library (the same specs, selectors, cache and messages). Exit status:
0 ok, 1 failure, 2 usage."""
import argparse
import sys
import time

from . import _core

DEFAULT_ARCHS = "sm_80,sm_86,sm_89,sm_90,sm_100,sm_120"


def _compiler(a, cache_dir=""):
    return _core.Compiler(specs=a.specs, cache_dir=cache_dir)


def cmd_list(a):
    with _compiler(a) as c:
        out = _core._P()
        _core._check(_core._list(_core._c.byref(out), c._h,
                                 _core._b(a.name, "name") if a.name else None))
        sys.stdout.write(_core._text(out))
    return 0


def cmd_explain(a):
    with _compiler(a) as c:
        runs, text = c.explain(a.name, a.arch)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0 if runs else 1


def cmd_precompile(a):
    archs = [x for x in (a.arch or DEFAULT_ARCHS).split(",") if x]
    counts = {"compiled": 0, "cached": 0, "remote": 0, "failed": 0, "gated": 0}
    t0 = time.monotonic()
    with _compiler(a, cache_dir=a.cache) as c:
        for arch in archs:
            _core._check(_core._check_target(c._h, _core._b(arch, "arch")))
        insts = c.instances()
        if a.names:
            sel = set()
            for n in a.names:
                sel.update(c.select(n))
            insts = [i for i in insts if i in sel]
        total, done = len(insts) * len(archs), 0
        for inst in insts:
            for arch in archs:
                done += 1
                note = ""
                try:
                    origin = c.precompile(inst, arch)
                    what = {"compiled": "compiled", "memory": "compiled",
                            "remote": "remote"}.get(origin, "cached")
                    if origin == "memory":  # the library warned why
                        note = " (in memory only: not written to the cache)"
                except _core.Error as e:
                    if e.status == "EARCH":
                        what = "gated"
                    else:
                        what = "failed"
                        print(f"jitk: {e.message}", file=sys.stderr)
                counts[what] += 1
                print(f"[{done}/{total}] {what if what != 'failed' else 'FAILED':<8} {inst} {arch}"
                      f"{note}", flush=True)
        where = c.cache_dir() or "(memory)"
    print(f"precompiled {len(insts)} symbols x {len(archs)} architectures ({','.join(archs)}) "
          f"into {where} in {time.monotonic() - t0:.2f} s with 1 processes: "
          f"{counts['compiled']} compiled, {counts['cached']} cached, {counts['remote']} remote, "
          f"{counts['failed']} failed, {counts['gated']} gated")
    return 1 if counts["failed"] else 0


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m jitk", description=" ".join(__doc__.split()))
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")
    sp = sub.add_parser("list", help="every symbol instance, its family, parameters and gates")
    sp.add_argument("name", nargs="?", help="a selector (default: all)")
    sp.add_argument("--specs", help="spec directories (colon-separated)")
    sp.set_defaults(fn=cmd_list)
    sp = sub.add_parser("explain", help="what runs on an architecture, and why")
    sp.add_argument("name")
    sp.add_argument("--arch", required=True, help="sm_XX")
    sp.add_argument("--specs")
    sp.set_defaults(fn=cmd_explain)
    sp = sub.add_parser("precompile", help="compile symbols for architectures into the cache")
    sp.add_argument("names", nargs="*", help="selectors (default: all)")
    sp.add_argument("--arch", help=f"comma-separated (default {DEFAULT_ARCHS})")
    sp.add_argument("--cache", help="the cache directory (default: the user cache)")
    sp.add_argument("--specs")
    sp.set_defaults(fn=cmd_precompile)
    a = p.parse_args(argv)
    if not a.cmd:
        p.print_usage(sys.stderr)
        return 2
    try:
        return a.fn(a)
    except _core.Error as e:
        print(f"jitk: {e.message}", file=sys.stderr)
        if e.detail:
            print(e.detail, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
