"""Host time per eager call, median of 10,000 calls, in one run: jitk's
fused norm + fp8 through jitk.ops (no dispatcher; through jitk._torch's
libtorch plan where it is built, else jitk._fast's C plan; JITK_TORCH_PLAN=0
takes the C plan), torch.ops.jitk (the dispatcher), the functional and out
variants and the generic ctypes call, next to torch.add on the same
tensors. Each call is timed alone with perf_counter_ns. By default each
case runs its calls in a row (a hot loop), in 10 blocks of 1,000 with the
cases taking turns block by block, so that a slow stretch of the machine
falls on all of them (--blocks 1: each case's calls all at once); with
--interleaved the cases take turns call by call (every call finds the
caches as the others left them). The GPU is synchronized every 100 to 200
calls (not timed), so the launch queue never fills and blocks the host.
The breakdown times each piece alone, one after the other.

    python3 bench/py_overhead.py [--rows 4096] [--calls 10000] [--blocks 10] [--interleaved]

Prints one table (us per call) and the ratio of the jitk.ops call to
torch.add; the issue's target is a ratio <= 1.0.
"""
import argparse
import os
import statistics
import sys
import time

try:  # the installed package (pip install ./bindings/python), else the source tree
    import jitk  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings",
                                    "python"))
import torch  # noqa: E402

import jitk  # noqa: E402


def blocked_us(fns, calls, blocks):
    """Median host us of each fn over calls calls, run in a row in blocks
    of calls / blocks, the fns taking turns block by block (a hot loop
    each, and a slow stretch of the machine shared by all)."""
    ts = [[] for _ in fns]
    per = max(1, calls // blocks)
    for _ in range(blocks):
        for f, t in zip(fns, ts):
            for i in range(per):
                if i % 200 == 0:
                    torch.cuda.synchronize()
                t0 = time.perf_counter_ns()
                f()
                t.append(time.perf_counter_ns() - t0)
            torch.cuda.synchronize()
    return [statistics.median(t) / 1000.0 for t in ts]


def interleaved_us(fns, calls):
    """Median host us of each fn, the fns taking turns call by call (the
    machine's drift is shared by all of them, not given to whichever ran
    in a slow second)."""
    ts = [[] for _ in fns]
    for i in range(calls):
        if i % 100 == 0:
            torch.cuda.synchronize()
        for f, t in zip(fns, ts):
            t0 = time.perf_counter_ns()
            f()
            t.append(time.perf_counter_ns() - t0)
    torch.cuda.synchronize()
    return [statistics.median(t) / 1000.0 for t in ts]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=4096)
    p.add_argument("--hidden", type=int, default=3072)
    p.add_argument("--calls", type=int, default=10000)
    p.add_argument("--interleaved", action="store_true",
                   help="the cases take turns call by call (else each runs its calls in a row)")
    p.add_argument("--blocks", type=int, default=10,
                   help="in a row: the calls in this many blocks, the cases taking turns "
                        "block by block (1: each case's calls all at once)")
    a = p.parse_args()
    if jitk.ops_error:
        raise SystemExit(f"jitk ops: {jitk.ops_error}")
    dev = torch.device("cuda")
    x = torch.randn(a.rows, a.hidden, device=dev).to(torch.bfloat16)
    x2 = torch.randn(a.rows, a.hidden, device=dev).to(torch.bfloat16)
    scale = torch.randn(a.hidden, device=dev).to(torch.bfloat16) * 0.2
    shift = torch.randn(a.hidden, device=dev).to(torch.bfloat16) * 0.2
    s = torch.tensor([0.5], device=dev)
    jitk.configure("fused_norm_scale_shift_fp8", "input_scale", s)
    y, q, c = torch.empty_like(x), torch.empty(x.shape, dtype=torch.float8_e4m3fn, device=dev), \
        torch.empty_like(x)
    rt = jitk.runtime()
    sym = "fused_norm_scale_shift_fp8"
    fn, fn_out = getattr(jitk.ops, sym), getattr(jitk.ops.out, sym)
    top, top_out = getattr(torch.ops.jitk, sym).default, getattr(torch.ops.jitk, sym).out
    cases = [
        ("torch.add(x, x2)", lambda: torch.add(x, x2)),
        ("torch.add(x, x2, out=c)", lambda: torch.add(x, x2, out=c)),
        (f"jitk.ops.{sym}", lambda: fn(x, scale, shift, s)),
        (f"jitk.ops.out.{sym}", lambda: fn_out(x, scale, shift, s, y=y, q=q)),
        (f"torch.ops.jitk.{sym}", lambda: top(x, scale, shift, s)),
        (f"torch.ops.jitk.{sym}.out", lambda: top_out(x, scale, shift, s, y=y, q=q)),
        (f"Runtime.call('{sym}') (ctypes)", lambda: rt.call(sym, "auto", y=y, q=q, x=x, scale=scale,
                                                            shift=shift, input_scale=s)),
    ]
    for _, f in cases:  # warm up: resolve, allocator
        for _ in range(50):
            f()
    fns = [f for _, f in cases]
    if a.interleaved:
        res = list(zip([n for n, _ in cases], interleaved_us(fns, a.calls)))
    else:
        res = list(zip([n for n, _ in cases], blocked_us(fns, a.calls, a.blocks)))
    from jitk import _ops
    plan = _ops.eager_plan + (f" ({_ops.eager_plan_note})" if _ops.eager_plan_note else "")
    print(f"host time per eager call, median of {a.calls}"
          f"{' (cases in turns)' if a.interleaved else f' (each case in a row, {a.blocks} blocks)'}, "
          f"rows={a.rows} hidden={a.hidden}, "
          f"{torch.cuda.get_device_name()}, torch {torch.__version__}, plan: {plan}")
    print(f"{'call':<58} {'us':>8}")
    for name, us in res:
        print(f"{name:<58} {us:8.2f}")
    base, out_base = res[0][1], res[1][1]
    print(f"jitk.ops functional / torch.add: {res[2][1] / base:.2f}; "
          f"jitk.ops.out / torch.add(out=): {res[3][1] / out_base:.2f} (target <= 1.00)")
    breakdown(a, sym, fn_out, dict(x=x, scale=scale, shift=shift, input_scale=s, y=y, q=q))


def breakdown(a, sym, fn_out, vals):
    """Where an eager out call's host time goes: its pieces timed alone."""
    from jitk import _ops
    spec = _ops.specs_registered[sym]
    g = fn_out.__globals__
    dev = vals["x"].get_device()
    plan = g["_plans"].get(dev) or g["_plan"](dev)
    stream = g["_stream"]
    args = [vals.get(c["name"], c.get("default")) for c in spec.call_args]
    x = vals["x"]
    parts = [
        ("the C plan alone (read 6 tensors, jitk_op_call, launch)",
         lambda: plan(stream(dev), *args)),
        ("raw current stream", lambda: stream(dev)),
        ("torch.compiler.is_compiling()", g["_compiling"]),
        ("one tensor's reads in Python (device, dtype, data_ptr, shape, stride)",
         lambda: (x.get_device(), x.dtype, x.data_ptr(), x.shape, x.stride())),
        ("torch.empty of one [rows, hidden] bf16 output",
         lambda: torch.empty((a.rows, a.hidden), dtype=torch.bfloat16, device=x.device)),
        ("torch.empty_like(x)", lambda: torch.empty_like(x)),
        ("x.new_empty((rows, hidden))", lambda: x.new_empty((a.rows, a.hidden))),
        ("x.is_contiguous()", lambda: x.is_contiguous()),
        ("x.stride()", lambda: x.stride()),
        ("x.shape", lambda: x.shape),
        ("x.data_ptr()", lambda: x.data_ptr()),
        ("a Python call with 6 arguments (a no-op)", lambda: (lambda *v, **k: None)(x, x, x, x, y=x, q=x)),
    ]
    tp = g.get("_tp")
    if tp is not None:
        shapes = [tuple(vals[c["name"]].shape) if c["name"] in ("y", "q") else
                  vals.get(c["name"], c.get("default")) for c in spec.call_args]
        parts[:0] = [("the libtorch plan alone (read 6 tensors, jitk_op_call, launch)",
                      lambda: tp(*args)),
                     ("the libtorch plan, allocating y and q", lambda: tp(*shapes))]
    print("\nwhere the time goes (each piece alone, median us):")
    for name, f in parts:
        for _ in range(50):
            f()
        print(f"  {name:<72} {blocked_us([f], a.calls, 1)[0]:8.2f}")



if __name__ == "__main__":
    main()
