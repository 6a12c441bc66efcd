#!/usr/bin/env python3
"""ncu_cases.py CASE - launch one jitk kernel a few times at a benchmark's
shape, for Nsight Compute (with --kernel-name naming the kernel, ncu
--launch-skip 3 --launch-count 1 takes its fourth launch: warm caches,
resolved kernel; the inputs' own kernels count too without the filter).

    qk       qk_norm_rope in place, Qwen-Image (24 + 24 heads of 128), 16384 tokens
    norm_q   fused_norm_scale_shift_fp8_q_only, 16384 x 3072
    norm_yq  fused_norm_scale_shift_fp8, 16384 x 3072
    gemm:WHO:M:N:K  the FP8 GEMM with bf16 out, per-tensor scales: WHO jitk
             (gemm_fp8 through the C plan, Runtime.call: no extension
             needed) or cublas (torch._scaled_mm, the same inputs)
"""
import os
import sys

try:  # the installed package, else the source tree
    import jitk  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings",
                                    "python"))
import torch  # noqa: E402

import jitk  # noqa: E402


def main(case):
    dev = torch.device("cuda")
    bf16 = torch.bfloat16
    g = torch.Generator(device=dev).manual_seed(0)
    if case == "qk":
        n, h, d = 16384, 24, 128
        qkv = torch.randn(n, 3 * h * d, device=dev, generator=g).to(bf16)
        q = qkv[:, :h * d].view(n, h, d)
        k = qkv[:, h * d:2 * h * d].view(n, h, d)
        w = (1 + 0.1 * torch.randn(d, device=dev, generator=g)).to(bf16)
        cs = torch.randn(n, d, device=dev, generator=g)

        def run():
            jitk.ops.out.qk_norm_rope(q_weight=w, k_weight=w, cos_sin=cs, q=q, k=k)
    elif case in ("norm_q", "norm_yq"):
        rows, hidden = 16384, 3072
        x = torch.randn(rows, hidden, device=dev, generator=g).to(bf16)
        sc = (0.2 * torch.randn(hidden, device=dev, generator=g)).to(bf16)
        sh = (0.2 * torch.randn(hidden, device=dev, generator=g)).to(bf16)
        s = torch.tensor([0.5], device=dev)
        qo = torch.empty(rows, hidden, device=dev, dtype=torch.float8_e4m3fn)
        y = torch.empty_like(x)
        sym = "fused_norm_scale_shift_fp8" + ("_q_only" if case == "norm_q" else "")
        jitk.configure(sym, "input_scale", s)
        fn = getattr(jitk.ops.out, sym)

        def run():
            if case == "norm_q":
                fn(x, sc, sh, s, q=qo)
            else:
                fn(x, sc, sh, s, y=y, q=qo)
    elif case.startswith("gemm:"):
        parts = case.split(":")
        if len(parts) != 5 or parts[1] not in ("jitk", "cublas") or \
                not all(p.isdigit() for p in parts[2:]):
            raise SystemExit(__doc__)
        who, m, n, k = parts[1], int(parts[2]), int(parts[3]), int(parts[4])
        e4m3 = torch.float8_e4m3fn
        a = torch.randn(m, k, device=dev, generator=g).to(e4m3)
        b = torch.randn(n, k, device=dev, generator=g).to(e4m3)
        sa, sb = torch.tensor([0.5], device=dev), torch.tensor([0.25], device=dev)
        out = torch.empty(m, n, device=dev, dtype=bf16)
        rt = jitk.runtime()

        def run():
            if who == "jitk":
                rt.call("gemm_fp8", a=a, b=b, a_scale=sa, b_scale=sb, out=out)
            else:
                torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=bf16)
    else:
        raise SystemExit(__doc__)
    for _ in range(6):
        run()
    torch.cuda.synchronize()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "")
