#!/usr/bin/env python3
"""qk_torch.py [--tokens LIST] [--heads H] [--reps N] [--lib PATH] - what a
user would otherwise run for QK-RMSNorm + RoPE after the packed QKV
projection of a Qwen-Image/FLUX attention block (24 heads of 128 by
default), timed the way `jitk bench --family qk` times jitk, in one process:

  eager           diffusers' way: q, k = chunks of the packed [1, N, 3 H D]
                  projection, unflattened to [1, N, H, D]; the RMSNorm
                  module (fp32 variance, x * rsqrt -> bf16, * weight) on
                  each; then the rotary function with real arithmetic
                  (use_real=True, pairs (2i, 2i + 1): x * cos + rotated(x)
                  * sin in fp32, back to bf16)
  compile         torch.compile of the same function, default mode
  compile-max     torch.compile, mode="max-autotune-no-cudagraphs"
  jitk            qk_norm_rope in place on the q and k views, through the
                  generic C entry point (ctypes over libjitk.so; the Python
                  binding's torch op is another issue's); skipped without
                  the library

CUDA events around each call, median of --reps, each call after 256 MiB
were read through the L2 on the same stream. Bytes as the contract counts
them (q and k read and written, plus the token's cos/sin row: 4 (2 H) D +
4 D per token). "% copy": of a device-to-device copy timed in the same run.
"differ": bf16 values of q and k that differ from eager's (share, and count of all)."""
import argparse
import ctypes as C
import os
import statistics
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class RMSNorm(torch.nn.Module):
    """diffusers.models.normalization.RMSNorm (elementwise_affine=True)."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(dim))

    def forward(self, hidden_states):
        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.eps)
        if self.weight.dtype in (torch.float16, torch.bfloat16):
            hidden_states = hidden_states.to(self.weight.dtype)
        return hidden_states * self.weight


def apply_rotary_emb(x, cos, sin):
    """diffusers' apply_rotary_emb(use_real=True, use_real_unbind_dim=-1,
    sequence_dim=1): x [B, S, H, D], cos and sin [S, D] fp32 (each
    frequency twice)."""
    cos = cos[None, :, None, :]
    sin = sin[None, :, None, :]
    x_real, x_imag = x.reshape(*x.shape[:-1], -1, 2).unbind(-1)
    x_rotated = torch.stack([-x_imag, x_real], dim=-1).flatten(3)
    return (x.float() * cos + x_rotated.float() * sin).to(x.dtype)


def qk_norm_rope(qkv, norm_q, norm_k, cos, sin, heads):
    q, k, _ = qkv.chunk(3, dim=-1)
    q = norm_q(q.unflatten(-1, (heads, -1)))
    k = norm_k(k.unflatten(-1, (heads, -1)))
    return apply_rotary_emb(q, cos, sin), apply_rotary_emb(k, cos, sin)


# ------------------------------------------------------------ jitk (ctypes)

class Dtype(C.Structure):
    _fields_ = [("code", C.c_uint8), ("bits", C.c_uint8), ("lanes", C.c_uint16)]


class Tensor(C.Structure):
    _fields_ = [("data", C.c_uint64), ("dtype", Dtype), ("ndim", C.c_int32),
                ("shape", C.c_int64 * 6), ("strides", C.c_int64 * 6)]


class ArgValue(C.Union):
    _fields_ = [("tensor", C.POINTER(Tensor)), ("i32", C.c_int32), ("i64", C.c_int64),
                ("f32", C.c_float)]


class Arg(C.Structure):
    _fields_ = [("name", C.c_char_p), ("type", C.c_int), ("v", ArgValue)]


class CallInfo(C.Structure):
    _fields_ = [("fallback", C.c_int), ("reason", C.c_char_p), ("instance", C.c_char_p)]


class Error(C.Structure):
    _fields_ = [("status", C.c_int), ("message", C.c_char_p), ("detail", C.c_char_p)]


DTYPES = {torch.bfloat16: (4, 16), torch.float32: (2, 32), torch.int32: (0, 32), torch.int64: (0, 64)}


def as_tensor(t):
    """A jitk_tensor describing torch tensor t (strides in elements)."""
    code, bits = DTYPES[t.dtype]
    j = Tensor()
    j.data = t.data_ptr()
    j.dtype = Dtype(code, bits, 1)
    j.ndim = t.dim()
    for i in range(t.dim()):
        j.shape[i] = t.shape[i]
        j.strides[i] = t.stride(i)
    return j


class Jitk:
    def __init__(self, lib):
        self.lib = C.CDLL(lib)
        self.lib.jitk_runtime_new.argtypes = [C.POINTER(C.c_void_p), C.c_void_p]
        self.lib.jitk_op_get.argtypes = [C.POINTER(C.c_void_p), C.c_void_p, C.c_char_p]
        self.lib.jitk_op_call.argtypes = [C.POINTER(CallInfo), C.c_void_p, C.c_int,
                                          C.POINTER(Arg), C.c_size_t, C.c_void_p]
        self.lib.jitk_error_last.restype = C.POINTER(Error)
        self.rt = C.c_void_p()
        self._check(self.lib.jitk_runtime_new(C.byref(self.rt), None))

    def _check(self, rc):
        if rc < 0:
            raise RuntimeError(self.lib.jitk_error_last().contents.message.decode())

    def op(self, selector):
        op = C.c_void_p()
        self._check(self.lib.jitk_op_get(C.byref(op), self.rt, selector.encode()))
        return op

    def prepare(self, tensors):
        """Arguments for op_call, built once: name -> torch tensor."""
        keep = [as_tensor(t) for t in tensors.values()]
        args = (Arg * len(keep))()
        for i, (name, j) in enumerate(zip(tensors, keep)):
            args[i].name = name.encode()
            args[i].type = 5  # JITK_ARG_TENSOR
            args[i].v.tensor = C.pointer(j)
        return args, keep

    def call(self, op, args):
        stream = C.c_void_p(torch.cuda.current_stream().cuda_stream)
        self._check(self.lib.jitk_op_call(None, op, 0, args, len(args), stream))


# ----------------------------------------------------------------- timing

_flush = None


def time_us(fn, reps):
    """Median microseconds of fn(), each call after 256 MiB were read
    through the L2 (a reduction) on the same stream."""
    global _flush
    if _flush is None:
        _flush = torch.full((64 << 20,), 7, dtype=torch.int32, device="cuda")
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        _flush.sum()
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", default="4096,16384,4608")
    ap.add_argument("--heads", type=int, default=24)
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--lib", default=os.path.join(ROOT, "build", "libjitk.so"))
    a = ap.parse_args()
    torch.manual_seed(0)
    H, D = a.heads, 128
    os.environ.setdefault("JITK_SPECS", os.path.join(ROOT, "specs"))
    jk = Jitk(a.lib) if os.path.exists(a.lib) else None
    fused = jk.op("qk_norm_rope") if jk else None

    src = torch.zeros(1 << 29, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    copy_us = time_us(lambda: dst.copy_(src), a.reps)
    copy_bw = 2 * src.numel() / (copy_us * 1e-6)
    del src, dst
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}, {H} + {H} heads of {D}, "
          f"R {D}, interleaved, weights; median of {a.reps}, L2 flushed (256 MiB read) before each")
    print(f"# device-to-device copy: {copy_bw / 1e12:.2f} TB/s")
    print(f"{'impl':12s} {'N':>6s} {'MB':>8s} {'us':>9s} {'% copy':>7s} {'vs jitk':>8s} {'differ':>8s}")

    # one specialization per shape (no dynamic-shape kernels)
    compiled = torch.compile(qk_norm_rope, dynamic=False)
    compiled_max = torch.compile(qk_norm_rope, dynamic=False, mode="max-autotune-no-cudagraphs")
    for n in [int(v) for v in a.tokens.split(",")]:
        qkv = torch.randn(1, n, 3 * H * D, device="cuda", dtype=torch.bfloat16)
        norm_q = RMSNorm(D).cuda().to(torch.bfloat16)
        norm_k = RMSNorm(D).cuda().to(torch.bfloat16)
        with torch.no_grad():
            norm_q.weight.copy_(1 + 0.1 * torch.randn(D))
            norm_k.weight.copy_(1 + 0.1 * torch.randn(D))
        pos = torch.arange(n, device="cuda", dtype=torch.float64)[:, None]
        freqs = pos * 10000.0 ** (-torch.arange(0, D, 2, device="cuda", dtype=torch.float64) / D)
        cos = freqs.cos().float().repeat_interleave(2, dim=-1)  # [N, D]
        sin = freqs.sin().float().repeat_interleave(2, dim=-1)
        nbytes = n * (4 * 2 * H * D + 4 * D)
        with torch.no_grad():
            ref_q, ref_k = qk_norm_rope(qkv, norm_q, norm_k, cos, sin, H)
            rows = []
            for name, fn in (("eager", qk_norm_rope), ("compile", compiled), ("compile-max", compiled_max)):
                us = time_us(lambda: fn(qkv, norm_q, norm_k, cos, sin, H), a.reps)
                q, k = fn(qkv, norm_q, norm_k, cos, sin, H)
                diff = ((q != ref_q).sum() + (k != ref_k).sum()).item(), 2 * q.numel()
                rows.append((name, us, diff))
            if jk:
                # the contract's table: cos in [0, R/2), sin in [R/2, R)
                table = torch.cat([cos[:, 0::2], sin[:, 0::2]], dim=1).contiguous()
                work = qkv.clone()
                q, k, _ = work.view(n, 3 * H, D).split(H, dim=1)
                args, keep = jk.prepare({"q": q, "k": k, "q_weight": norm_q.weight.data,
                                         "k_weight": norm_k.weight.data, "cos_sin": table})
                jk.call(fused, args)
                torch.cuda.synchronize()
                diff = ((q != ref_q[0]).sum() + (k != ref_k[0]).sum()).item(), 2 * q.numel()
                us = time_us(lambda: jk.call(fused, args), a.reps)  # in place, again and again
                rows.append(("jitk", us, diff))
                del keep
            base = rows[-1][1] if jk else None
            for name, us, diff in rows:
                vs = f"{us / base:7.2f}x" if base else "      -"
                print(f"{name:12s} {n:6d} {nbytes / 1e6:8.1f} {us:9.1f} {100 * nbytes / (us * 1e-6) / copy_bw:6.1f}%"
                      f" {vs:>8s} {100 * diff[0] / diff[1]:7.4f}% ({diff[0]} of {diff[1]})", flush=True)


if __name__ == "__main__":
    sys.exit(main())
