#!/usr/bin/env python3
"""torch_baseline.py [--rows LIST] [--hidden LIST] - time what a user would
otherwise run for the fused fp8 norm: PyTorch eager and torch.compile of
layer_norm -> modulate -> clamp -> cast to float8_e4m3fn (and the gated
residual form) - default and mode="max-autotune-no-cudagraphs" - and jitk's fused kernels through the Python binding, over
the same tensors in the same process, with CUDA events over input sets
rotated to exceed the L2 (fresh random data, warm-up, medians). Prints one
line per case: impl, kernel, hidden, rows, microseconds after a clean and
after a dirty L2 flush."""
import argparse
import os
import statistics
import sys

import torch
import torch.nn.functional as F


def plain(x, scale, shift, input_scale):
    n = F.layer_norm(x, (x.shape[-1],), eps=1e-6)
    y = n * (1 + scale) + shift
    q = (y.float() / input_scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return y, q


def residual(x, res, gate, scale, shift, input_scale):
    r = res + gate * x
    n = F.layer_norm(r, (r.shape[-1],), eps=1e-6)
    y = n * (1 + scale) + shift
    q = (y.float() / input_scale).clamp(-448.0, 448.0).to(torch.float8_e4m3fn)
    return r, y, q


_flush = None


def time_fn(fn, sets, reps=100, clean=True):
    """Median microseconds of one call, event-timed after 256 MiB passed
    through the L2 on the same stream (GPU busy while the host enqueues), as
    jitk bench does: read by a reduction (clean=True: the L2 is left with
    clean lines) or written (clean=False: dirty lines, whose write-back the
    timed call pays for, as after Triton's do_bench flush)."""
    global _flush
    if _flush is None:
        _flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
        _flush.fill_(0x5a)
    for i in range(10):
        fn(*sets[i % len(sets)])
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    words = _flush.view(torch.int32)
    for i in range(reps):
        if clean:
            words.sum()
        else:
            _flush.fill_(i & 0xff)
        starts[i].record()
        fn(*sets[i % len(sets)])
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)) * 1e3


def both(fn, sets):
    """'clean dirty' microseconds, formatted."""
    return f"{time_fn(fn, sets):10.2f} {time_fn(fn, sets, clean=False):10.2f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="128,1024,4096,16384")
    ap.add_argument("--hidden", default="3072")
    a = ap.parse_args()
    torch.manual_seed(0)
    # One specialization per shape: with the default (automatic dynamic
    # shapes after a second shape), every size after the first would run
    # a slower shape-generic kernel.
    compiled_plain = torch.compile(plain, dynamic=False)
    compiled_res = torch.compile(residual, dynamic=False)
    # and the best Inductor offers without CUDA graphs (it autotunes the
    # generated Triton kernels per shape)
    tuned_plain = torch.compile(plain, dynamic=False, mode="max-autotune-no-cudagraphs")
    tuned_res = torch.compile(residual, dynamic=False, mode="max-autotune-no-cudagraphs")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, os.path.join(root, "bindings", "python"))
    import jitk
    rt = jitk.Runtime(specs=os.path.join(root, "specs"))
    for h in [int(v) for v in a.hidden.split(",")]:
        for rows in [int(v) for v in a.rows.split(",")]:
            per_set = rows * h * 9
            k = max(2, min(64, -(-240_000_000 // per_set)))
            scale = torch.randn(h, device="cuda", dtype=torch.bfloat16) * 0.2
            shift = torch.randn(h, device="cuda", dtype=torch.bfloat16) * 0.2
            gate = torch.randn(h, device="cuda", dtype=torch.bfloat16) * 0.5
            s = torch.tensor([0.4754464328289032], device="cuda")
            xs = [torch.randn(rows, h, device="cuda", dtype=torch.bfloat16) for _ in range(k)]
            rs = [torch.randn(rows, h, device="cuda", dtype=torch.bfloat16) for _ in range(k)]
            psets = [(x, scale, shift, s) for x in xs]
            rsets = [(x, r, gate, scale, shift, s) for x, r in zip(xs, rs)]
            rt.configure_input_scale(s)
            ys = [torch.empty_like(x) for x in xs]
            qs = [torch.empty(rows, h, device="cuda", dtype=torch.float8_e4m3fn) for _ in xs]
            ros = [torch.empty_like(x) for x in xs]
            jsets = [(x, scale, shift, s, y, q) for x, y, q in zip(xs, ys, qs)]
            jrsets = [(x, r, gate, scale, shift, s, y, q, ro)
                      for x, r, y, q, ro in zip(xs, rs, ys, qs, ros)]

            def jp(x, sc, sh, s_, y, q):
                return rt.fused_norm_scale_shift_fp8(x, sc, sh, s_, y, q)

            def jr(x, r, g, sc, sh, s_, y, q, ro):
                return rt.fused_scale_residual_norm_scale_shift_fp8(x, r, g, sc, sh, s_, y, q, ro)
            print(f"{'jitk (python)':14s} fp8          {h:6d} {rows:6d} {both(jp, jsets)}", flush=True)
            print(f"{'jitk (python)':14s} residual_fp8 {h:6d} {rows:6d} {both(jr, jrsets)}", flush=True)
            for impl, fp, fr in (("eager", plain, residual),
                                 ("torch.compile", compiled_plain, compiled_res),
                                 ("max-autotune", tuned_plain, tuned_res)):
                print(f"{impl:14s} fp8          {h:6d} {rows:6d} {both(fp, psets)}", flush=True)
                print(f"{impl:14s} residual_fp8 {h:6d} {rows:6d} {both(fr, rsets)}", flush=True)


if __name__ == "__main__":
    main()
