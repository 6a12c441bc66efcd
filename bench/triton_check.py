#!/usr/bin/env python3
"""triton_check.py DUMP_DIR - compare jitk's FP8 quantizer bytes with a
Triton static FP8 quantizer (1/scale computed in the kernel, as the
reference quantizer does, which Triton lowers to div.full.f32) and with
PyTorch's correctly rounded (y * (1/s)).clamp().to(float8_e4m3fn).

DUMP_DIR holds quant_h<H>_r<rows>_res<r>_s<scale bits>.bin files written by
tests/test_gpu with JITK_GPU_DUMP: rows*H bf16 inputs, then rows*H bytes of
jitk's q. Also checks NaN and infinity inputs against the bytes jitk
defines (NaN -> 0x7e via the clamp, +inf -> 0x7e, -inf -> 0xfe)."""
import glob
import os
import struct
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def _quant(x_ptr, q_ptr, s_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    inv = 1.0 / tl.load(s_ptr)
    y = tl.clamp(x * inv, -448.0, 448.0)
    tl.store(q_ptr + offs, y.to(tl.float8e4nv), mask=mask)


def triton_quant(x, s):
    q = torch.empty(x.shape, dtype=torch.float8_e4m3fn, device=x.device)
    n = x.numel()
    _quant[(triton.cdiv(n, 1024),)](x, q, s, n, BLOCK=1024)
    return q


def main(d):
    files = sorted(glob.glob(os.path.join(d, "quant_*.bin")))
    total = triton_diff = torch_diff = 0
    per_scale = {}
    for f in files:
        name = os.path.basename(f)
        h = int(name.split("_h")[1].split("_")[0])
        rows = int(name.split("_r")[1].split("_")[0])
        bits = int(name.split("_s")[1].split(".")[0], 16)
        scale = struct.unpack("<f", struct.pack("<I", bits))[0]
        n = h * rows
        raw = open(f, "rb").read()
        y = torch.frombuffer(bytearray(raw[:2 * n]), dtype=torch.bfloat16).cuda()
        q_jitk = torch.frombuffer(bytearray(raw[2 * n:3 * n]), dtype=torch.uint8).cuda()
        s = torch.tensor([scale], dtype=torch.float32, device="cuda")
        q_tri = triton_quant(y, s).view(torch.uint8)
        q_torch = (y.float() * (1.0 / s)).clamp(-448, 448).to(torch.float8_e4m3fn).view(torch.uint8)
        dt = int((q_tri != q_jitk).sum())
        dp = int((q_torch != q_jitk).sum())
        total += n
        triton_diff += dt
        torch_diff += dp
        key = f"{scale:.10g} (0x{bits:08x})"
        a = per_scale.setdefault(key, [0, 0, 0])
        a[0] += n
        a[1] += dt
        a[2] += dp
    print(f"{len(files)} dumps, {total} values")
    print(f"{'scale':<28} {'values':>10} {'jitk!=triton':>13} {'jitk!=torch':>12}")
    for k, (n, dt, dp) in per_scale.items():
        print(f"{k:<28} {n:>10} {dt:>13} {dp:>12}")
    print(f"jitk vs Triton div.full quantizer: {triton_diff} differing bytes")
    print(f"jitk vs PyTorch correctly rounded reciprocal: {torch_diff} differing bytes")
    # Non-finite inputs.
    special = torch.tensor([float("nan"), float("inf"), float("-inf"), 1e30, -1e30, 0.0, -0.0],
                           dtype=torch.bfloat16, device="cuda")
    s = torch.tensor([0.5], dtype=torch.float32, device="cuda")
    got = triton_quant(special, s).view(torch.uint8).tolist()
    want = [0x7e, 0x7e, 0xfe, 0x7e, 0xfe, 0x00, 0x80]
    print("triton on nan, inf, -inf, 1e30, -1e30, 0, -0:", [hex(v) for v in got],
          "jitk defines", [hex(v) for v in want])
    ok = triton_diff == 0 and got == want
    print("TRITON CHECK:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
