#!/usr/bin/env python3
"""axes_torch.py [--rows LIST] [--hidden LIST] [--reps N] - the norm family's
new axes (issue 12) side by side in one process: PyTorch eager,
torch.compile (default) and torch.compile (max-autotune-no-cudagraphs) of
the same math, and jitk's fused kernels through the Python binding's
generic call, over the same tensors.

Cases (B = 2 batches of rows / 2 rows, Qwen-Image's classifier-free
guidance pair): per_batch fp8 (y and q), per_batch residual fp8, indexed
fp8 (two modulations, index 0 for the first half of each batch), q only
(y not materialized), per-token fp8 (y, q and the row scales s).

Each timing is the median of REPS single calls, each event-timed after
256 MiB passed through the L2 on the same stream (read by a reduction:
clean lines, and the GPU busy while the host enqueues), so that the
interval is the kernel(s) and not the host; inputs rotate over sets that
exceed the L2. Bandwidth counts the contract's bytes (docs/kernels.md);
"% copy" is against a large device copy measured here.

Run from the repository root, with JITK_LIBRARY pointing at libjitk.so
(bench/device_run.sh sets it)."""
import argparse
import os
import statistics
import sys

import torch
import torch.nn.functional as F

FP8 = torch.float8_e4m3fn


def modulate(n, scale, shift, L):
    """n [B*L, H]; scale, shift [B, H] (or [rows, H] per row)."""
    B = scale.shape[0]
    return (n.view(B, L, -1) * (1 + scale[:, None]) + shift[:, None]).view(n.shape)


def static_q(y, s):
    return (y.float() / s).clamp(-448.0, 448.0).to(FP8)


def per_batch_fp8(x, scale, shift, s, L):
    y = modulate(F.layer_norm(x, (x.shape[-1],), eps=1e-6), scale, shift, L)
    return y, static_q(y, s)


def per_batch_q_only(x, scale, shift, s, L):
    return per_batch_fp8(x, scale, shift, s, L)[1]


def per_batch_residual_fp8(x, res, gate, scale, shift, s, L):
    B = scale.shape[0]
    r = (res.view(B, L, -1) + gate[:, None] * x.view(B, L, -1)).view(x.shape)
    y = modulate(F.layer_norm(r, (r.shape[-1],), eps=1e-6), scale, shift, L)
    return r, y, static_q(y, s)


def indexed_fp8(x, scale0, shift0, scale1, shift1, index, s, L):
    B = scale0.shape[0]
    pick = index.view(B, L, 1).bool()
    sc = torch.where(pick, scale1[:, None], scale0[:, None])
    sh = torch.where(pick, shift1[:, None], shift0[:, None])
    n = F.layer_norm(x, (x.shape[-1],), eps=1e-6).view(B, L, -1)
    y = (n * (1 + sc) + sh).view(x.shape)
    return y, static_q(y, s)


def per_token_fp8(x, scale, shift, L):
    y = modulate(F.layer_norm(x, (x.shape[-1],), eps=1e-6), scale, shift, L)
    amax = y.abs().amax(dim=-1, keepdim=True).float()
    s = (amax / 448.0).clamp(min=1.0 / 229376.0)
    q = (y.float() / s).clamp(-448.0, 448.0).to(FP8)
    return y, q, s.view(-1)


_flush = None


def time_fn(fn, sets, reps):
    """Median microseconds of one call after a clean 256 MiB L2 flush."""
    global _flush
    if _flush is None:
        _flush = torch.full(((256 << 20) // 4,), 0x5a5a5a5a, dtype=torch.int32, device="cuda")
    for i in range(10):
        fn(*sets[i % len(sets)])
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        _flush.sum()
        starts[i].record()
        fn(*sets[i % len(sets)])
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)) * 1e3


def copy_bandwidth():
    a = torch.empty(1 << 31, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    torch.cuda.synchronize()
    times = []
    for _ in range(10):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        b.copy_(a)
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    return 2 * a.numel() / (min(times) * 1e-3)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="4096,16384")
    ap.add_argument("--hidden", default="3072")
    ap.add_argument("--reps", type=int, default=100)
    a = ap.parse_args()
    torch.manual_seed(0)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, os.path.join(root, "bindings", "python"))
    import jitk
    rt = jitk.Runtime(specs=os.path.join(root, "specs"))
    peak = copy_bandwidth()
    print(f"device: {torch.cuda.get_device_name()}; copy {peak / 1e9:.0f} GB/s (read + written); "
          f"torch {torch.__version__}")
    impls = {"eager": lambda f: f,
             "compile": lambda f: torch.compile(f, dynamic=False),
             "max-autotune": lambda f: torch.compile(f, dynamic=False,
                                                     mode="max-autotune-no-cudagraphs")}
    fns = {"per_batch fp8": per_batch_fp8, "per_batch residual fp8": per_batch_residual_fp8,
           "indexed fp8": indexed_fp8, "per_batch fp8 q only": per_batch_q_only,
           "per_batch fp8 per token": per_token_fp8}
    compiled = {(c, i): mk(f) for c, f in fns.items() for i, mk in impls.items()}
    # contract bytes per element (s adds 4 per row)
    per_elem = {"per_batch fp8": 5, "per_batch residual fp8": 9, "indexed fp8": 5,
                "per_batch fp8 q only": 3, "per_batch fp8 per token": 5}
    print(f"{'case':26s} {'hidden':>6s} {'rows':>6s} {'impl':>14s} {'us':>9s} {'GB/s':>7s} "
          f"{'% copy':>7s} {'vs jitk':>8s}")
    for h in [int(v) for v in a.hidden.split(",")]:
        for rows in [int(v) for v in a.rows.split(",")]:
            B, L = 2, rows // 2
            k = max(2, min(32, -(-300_000_000 // (rows * h * 11))))
            dev, bf = "cuda", torch.bfloat16
            sc = torch.randn(B, h, device=dev, dtype=bf) * 0.2
            sh = torch.randn(B, h, device=dev, dtype=bf) * 0.2
            sc1 = torch.randn(B, h, device=dev, dtype=bf) * 0.3 + 0.1
            sh1 = torch.randn(B, h, device=dev, dtype=bf) * 0.3 - 0.1
            gate = torch.randn(B, h, device=dev, dtype=bf) * 0.5
            s = torch.tensor([0.4754464328289032], device=dev)
            rt.configure_input_scale(s)
            index = (torch.arange(rows, device=dev) % L >= L // 2).to(torch.uint8)
            xs = [torch.randn(rows, h, device=dev, dtype=bf) for _ in range(k)]
            rs = [torch.randn(rows, h, device=dev, dtype=bf) for _ in range(k)]
            ys = [torch.empty_like(x) for x in xs]
            qs = [torch.empty(rows, h, device=dev, dtype=FP8) for _ in xs]
            ros = [torch.empty_like(x) for x in xs]
            ss = [torch.empty(rows, device=dev) for _ in xs]
            torch_sets = {
                "per_batch fp8": [(x, sc, sh, s, L) for x in xs],
                "per_batch residual fp8": [(x, r, gate, sc, sh, s, L) for x, r in zip(xs, rs)],
                "indexed fp8": [(x, sc, sh, sc1, sh1, index, s, L) for x in xs],
                "per_batch fp8 q only": [(x, sc, sh, s, L) for x in xs],
                "per_batch fp8 per token": [(x, sc, sh, L) for x in xs],
            }
            call = rt.call
            jitk_fns = {
                "per_batch fp8": (lambda x, y, q, r, ro, s_: call(
                    "fused_norm_scale_shift_per_batch_fp8", y=y, q=q, x=x, scales=sc, shifts=sh,
                    input_scale=s, L=L, eps=1e-6)),
                "per_batch residual fp8": (lambda x, y, q, r, ro, s_: call(
                    "fused_scale_residual_norm_scale_shift_per_batch_fp8", y=y, q=q,
                    residual_out=ro, x=x, residual=r, gates=gate, scales=sc, shifts=sh,
                    input_scale=s, L=L, eps=1e-6)),
                "indexed fp8": (lambda x, y, q, r, ro, s_: call(
                    "fused_norm_scale_shift_indexed_fp8", y=y, q=q, x=x, scale0=sc, shift0=sh,
                    scale1=sc1, shift1=sh1, index=index.view(B, L), input_scale=s, eps=1e-6)),
                "per_batch fp8 q only": (lambda x, y, q, r, ro, s_: call(
                    "fused_norm_scale_shift_per_batch_fp8_q_only", q=q, x=x, scales=sc,
                    shifts=sh, input_scale=s, L=L, eps=1e-6)),
                "per_batch fp8 per token": (lambda x, y, q, r, ro, s_: call(
                    "fused_norm_scale_shift_per_batch_fp8_per_token", y=y, q=q, x=x, scales=sc,
                    shifts=sh, s=s_, L=L, eps=1e-6)),
            }
            jsets = list(zip(xs, ys, qs, rs, ros, ss))
            for case in fns:
                bytes_ = rows * h * per_elem[case] + (4 * rows if "per token" in case else 0)
                t_j = time_fn(jitk_fns[case], jsets, a.reps)
                rows_out = [("jitk", t_j)]
                for impl in impls:
                    rows_out.append((impl, time_fn(compiled[(case, impl)], torch_sets[case], a.reps)))
                for impl, t in rows_out:
                    gbps = bytes_ / (t * 1e-6)
                    print(f"{case:26s} {h:6d} {rows:6d} {impl:>14s} {t:9.2f} {gbps / 1e9:7.0f} "
                          f"{100 * gbps / peak:6.1f}% {t / t_j:7.2f}x", flush=True)


if __name__ == "__main__":
    main()
