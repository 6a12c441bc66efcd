"""bench/gemm_check.py - the FP8 GEMM family (specs/gemm_fp8.yaml) on a GPU,
through its torch ops: correctness against a float64 reference of
shared/kernel-contract.md's "FP8 GEMM with fused epilogues" (next to
torch._scaled_mm measured the same way), fused == split byte for byte,
every output element written, bad input refused before a launch; then
times against torch._scaled_mm (cuBLAS) in the same process.

    python bench/gemm_check.py [--quick] [--no-perf] [--no-check] [--out FILE]

--quick: one shape, for compute-sanitizer. Prints tables (markdown) and
exits 1 if a check fails."""
import argparse
import math
import sys
import time

import torch

import jitk

E4M3 = torch.float8_e4m3fn
SHAPES = ((9216, 3072), (3072, 3072), (12288, 3072), (3072, 12288))  # (N, K)
MS = (1, 127, 512, 4096, 4608)
OUT_SCALES = (0.4754464328289032, 0.005)  # 213/448 (the contract's) and many saturated
ops = torch.ops.jitk
failures = []


def fail(what):
    failures.append(what)
    print("FAIL", what, flush=True)


class Inputs:
    def __init__(self, m, n, k, seed):
        g = torch.Generator(device="cuda").manual_seed(seed)
        dev = "cuda"
        self.a_scale = torch.tensor([0.0173], device=dev)
        self.b_scale = torch.tensor([0.00123], device=dev)
        self.a = (torch.randn(m, k, device=dev, generator=g) / self.a_scale).to(E4M3)
        self.b = (torch.randn(n, k, device=dev, generator=g) * 0.02 / self.b_scale).to(E4M3)
        self.bias = (torch.randn(n, device=dev, generator=g) * 0.5).to(torch.bfloat16)
        self.m, self.n, self.k = m, n, k

    def gate_residual(self, batches, seed):
        g = torch.Generator(device="cuda").manual_seed(seed)
        self.gate = (torch.randn(batches, self.n, device="cuda", generator=g)).to(torch.bfloat16)
        self.residual = (torch.randn(self.m, self.n, device="cuda", generator=g) * 4).to(torch.bfloat16)
        self.L = self.m // batches


def reference_d(x, rows, bias):
    """float64 of steps 1-2 without the bf16 rounding: acc * alpha (+ bias),
    alpha = fl32(a_scale * b_scale), on the given rows."""
    alpha = (x.a_scale * x.b_scale).double()
    acc = x.a[rows].double() @ x.b.double().t()
    d = acc * alpha
    if bias:
        d = d + x.bias.double()
    return d


def bf16_ulps(got, ref):
    """|got - ref| in units of bf16's last place at ref."""
    e = torch.floor(torch.log2(ref.abs().clamp_min(2.0 ** -126)))
    ulp = torch.pow(2.0, e - 7)
    return ((got.double() - ref).abs() / ulp).max().item()


def rel_l2(got, ref):
    return ((got.double() - ref).norm() / ref.norm().clamp_min(1e-300)).item()


def rows_checked(m, g):
    if m <= 66:
        return torch.arange(m, device="cuda")
    pick = torch.randperm(m - 2, generator=g, device="cpu")[:64] + 1
    return torch.cat([torch.tensor([0, m - 1]), pick]).to("cuda")


def poisoned(shape, dtype):
    t = torch.empty(shape, dtype=dtype, device="cuda")
    t.view(torch.uint8).fill_(0xFF)  # NaN in bf16 and in e4m3fn
    return t


def same_bytes(x, y):
    return torch.equal(x.contiguous().view(torch.uint8), y.contiguous().view(torch.uint8))


def check_shape(m, n, k, seed, accuracy, cublas=True):
    x = Inputs(m, n, k, seed)
    g = torch.Generator().manual_seed(seed)
    rows = rows_checked(m, g)
    tag = f"{m}x{n}x{k}"
    # none and bias: against the float64 reference, every element written
    for bias in (False, True):
        out = poisoned((m, n), torch.bfloat16)
        if bias:
            ops.gemm_fp8_bias.out(x.a, x.b, x.a_scale, x.b_scale, x.bias, out=out)
        else:
            ops.gemm_fp8.out(x.a, x.b, x.a_scale, x.b_scale, out=out)
        torch.cuda.synchronize()
        if torch.isnan(out).any():
            fail(f"{tag} bias={bias}: {int(torch.isnan(out).sum())} elements not written")
        ref = reference_d(x, rows, bias)
        got = out[rows]
        cub = torch._scaled_mm(x.a, x.b.t(), x.a_scale, x.b_scale, bias=x.bias if bias else None,
                               out_dtype=torch.bfloat16)[rows] if cublas else got
        accuracy.append((tag, "bias" if bias else "none", rel_l2(got, ref), bf16_ulps(got, ref),
                         rel_l2(cub, ref), bf16_ulps(cub, ref), int((got != cub).sum())))
        if rel_l2(got, ref) > 4e-3:
            fail(f"{tag} bias={bias}: rel L2 {rel_l2(got, ref):.3g}")
    d = ops.gemm_fp8_bias(x.a, x.b, x.a_scale, x.b_scale, x.bias)
    # gelu_tanh_fp8 (and with g): fused == split
    for s in OUT_SCALES:
        os_ = torch.tensor([s], device="cuda")
        for sym in ("gemm_fp8_gelu_tanh_fp8", "gelu_tanh_quant_fp8", "gemm_fp8_gelu_tanh_fp8_out",
                    "gelu_tanh_quant_fp8_out"):
            jitk.configure(sym, "out_scale", os_)
        q = poisoned((m, n), E4M3)
        ops.gemm_fp8_gelu_tanh_fp8.out(x.a, x.b, x.a_scale, x.b_scale, x.bias, os_, q=q)
        q_split = ops.gelu_tanh_quant_fp8(d, os_)
        if not same_bytes(q, q_split):
            diff = int((q.view(torch.uint8) != q_split.view(torch.uint8)).sum())
            fail(f"{tag} gelu_tanh_fp8 out_scale={s}: fused != split in {diff} bytes")
        gq = poisoned((m, n), torch.bfloat16)
        q2 = poisoned((m, n), E4M3)
        ops.gemm_fp8_gelu_tanh_fp8_out.out(x.a, x.b, x.a_scale, x.b_scale, x.bias, os_, out=gq, q=q2)
        q_s, g_s = ops.gelu_tanh_quant_fp8_out(d, os_)
        if not (same_bytes(q2, q_s) and same_bytes(gq, g_s) and same_bytes(q2, q)):
            fail(f"{tag} gelu_tanh_fp8_out out_scale={s}: fused != split")
        jitk.unconfigure(os_)
    # gate_residual: 1 batch, and several (L not a multiple of the tile height)
    for batches in sorted({1, 8 if m % 8 == 0 else 1, 4 if m % 4 == 0 else 1}):
        x.gate_residual(batches, seed + batches)
        out = poisoned((m, n), torch.bfloat16)
        ops.gemm_fp8_gate_residual.out(x.a, x.b, x.a_scale, x.b_scale, x.bias, x.gate, x.residual,
                                       x.L, out=out)
        split = ops.gate_residual(d, x.gate, x.residual, x.L)
        if not same_bytes(out, split):
            diff = int((out.view(torch.uint16) != split.view(torch.uint16)).sum())
            fail(f"{tag} gate_residual B={batches}: fused != split in {diff} elements")
        # in place: out is residual
        inplace = x.residual.clone()
        ops.gemm_fp8_gate_residual.out(x.a, x.b, x.a_scale, x.b_scale, x.bias, x.gate, inplace,
                                       x.L, out=inplace)
        if not same_bytes(inplace, split):
            fail(f"{tag} gate_residual B={batches} in place: differs from out-of-place")


def check_gelu_every_value():
    """Every value of v through the fused GELU: with A = 0, d = bias, and a
    bias holding every bf16 bit pattern puts all 65536 values of v (but
    -0, which d rounds to +0, and the NaNs, which it makes one) through
    both instances (small and large M class); fused == split, g and q."""
    n, k = 65536, 128
    bits = torch.arange(n, dtype=torch.int32)
    bias = torch.where(bits >= 32768, bits - 65536, bits).to(torch.int16).view(torch.bfloat16).cuda()
    one = torch.ones(1, device="cuda")
    b = torch.zeros((n, k), device="cuda").to(E4M3)
    for m in (128, 1024):
        a = torch.zeros((m, k), device="cuda").to(E4M3)
        d = ops.gemm_fp8_bias(a, b, one, one, bias)
        covered = int(torch.unique(d.view(torch.int16)[0]).numel())
        for s in OUT_SCALES:
            os_ = torch.tensor([s], device="cuda")
            for sym in ("gemm_fp8_gelu_tanh_fp8_out", "gelu_tanh_quant_fp8_out"):
                jitk.configure(sym, "out_scale", os_)
            g = poisoned((m, n), torch.bfloat16)
            q = poisoned((m, n), E4M3)
            ops.gemm_fp8_gelu_tanh_fp8_out.out(a, b, one, one, bias, os_, out=g, q=q)
            q_s, g_s = ops.gelu_tanh_quant_fp8_out(d, os_)
            torch.cuda.synchronize()
            if not (same_bytes(g, g_s) and same_bytes(q, q_s)):
                diff = int((g.view(torch.int16) != g_s.view(torch.int16)).sum())
                fail(f"every v, M={m}, out_scale={s}: fused != split ({diff} of g differ)")
            jitk.unconfigure(os_)
        print(f"every bf16 v through the fused GELU, M={m}: {covered} distinct values of d, fused == split")


def check_ops():
    """The family's ops as PyTorch ops: torch.library.opcheck (schema, fake
    kernel, dispatcher) on each symbol's functional and .out variants; a
    function of two of them under torch.compile(fullgraph=True) and
    replayed from a CUDA graph on new inputs, the bytes of eager's."""
    from torch.library import opcheck
    x = Inputs(127, 3072, 3072, 11)
    x.gate_residual(1, 12)
    os_ = torch.tensor([0.4754464328289032], device="cuda")
    for sym in ("gemm_fp8_gelu_tanh_fp8", "gemm_fp8_gelu_tanh_fp8_out"):
        jitk.configure(sym, "out_scale", os_)
    m, n = x.m, x.n
    cases = [
        ("gemm_fp8", (x.a, x.b, x.a_scale, x.b_scale), {"out": torch.empty(m, n, dtype=torch.bfloat16,
                                                                           device="cuda")}),
        ("gemm_fp8_bias", (x.a, x.b, x.a_scale, x.b_scale, x.bias),
         {"out": torch.empty(m, n, dtype=torch.bfloat16, device="cuda")}),
        ("gemm_fp8_gelu_tanh_fp8", (x.a, x.b, x.a_scale, x.b_scale, x.bias, os_),
         {"q": torch.empty(m, n, dtype=E4M3, device="cuda")}),
        ("gemm_fp8_gate_residual", (x.a, x.b, x.a_scale, x.b_scale, x.bias, x.gate, x.residual, x.L),
         {"out": torch.empty(m, n, dtype=torch.bfloat16, device="cuda")}),
    ]
    # PyTorch's schema check compares arguments before and after with
    # allclose, which has no fp8 kernel, and opcheck runs the op on copies
    # (a copy of a configured out_scale was never configured: the GELU
    # symbols have no fallback to run instead), so: the schema's outputs by
    # hand (nothing but out / q written), and for the GELU the fake kernel
    # against the real one by hand (shapes, dtypes)
    done = 0
    for sym, args, outs in cases:
        packet = getattr(ops, sym)
        gelu = "gelu" in sym
        utils = ("test_autograd_registration",) if gelu else \
            ("test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
        for op, kw in ((packet.default, {}), (packet.out, outs)):
            try:
                before = [t.clone() for t in args if isinstance(t, torch.Tensor)]
                real = op(*args, **kw)
                after = [t for t in args if isinstance(t, torch.Tensor)]
                if not all(same_bytes(b, a) for b, a in zip(before, after)):
                    fail(f"{op}: an input was written")
                meta = op(*[t.to("meta") if isinstance(t, torch.Tensor) else t for t in args],
                          **{k: v.to("meta") for k, v in kw.items()})
                if kw:  # .out returns nothing: its outputs are the caller's
                    if real is not None or meta is not None:
                        fail(f"{op}: .out returned {type(real).__name__} / {type(meta).__name__}")
                else:
                    real = real if isinstance(real, (tuple, list)) else (real,)
                    meta = meta if isinstance(meta, (tuple, list)) else (meta,)
                    if [(tuple(r.shape), r.dtype) for r in real] != \
                            [(tuple(m.shape), m.dtype) for m in meta]:
                        fail(f"{op}: the fake kernel's outputs are not the real one's")
                opcheck(op, args, kw, test_utils=utils)
                done += 1
            except Exception as e:  # opcheck raises OpCheckError
                fail(f"opcheck {op}: {str(e).splitlines()[0][:300]}")

    def mlp(a, b, a_scale, b_scale, bias, scale):
        return ops.gemm_fp8_gelu_tanh_fp8(ops.gemm_fp8_gelu_tanh_fp8(a, b, a_scale, b_scale, bias, scale),
                                          b, a_scale, b_scale, bias, scale)
    sq = Inputs(256, 3072, 3072, 13)  # N = K: the second GEMM takes the first's q
    args = (sq.a, sq.b, sq.a_scale, sq.b_scale, sq.bias, os_)
    want = mlp(*args)
    got = torch.compile(mlp, fullgraph=True)(*args)
    if not same_bytes(got, want):
        fail("torch.compile(fullgraph=True) of two gemm_fp8_gelu_tanh_fp8: differs from eager")
    static = [args[0].clone(), *args[1:]]  # a new A each replay; the configured out_scale kept
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        res = mlp(*static)
    fresh = Inputs(256, 3072, 3072, 14)
    static[0].copy_(fresh.a)
    g.replay()
    torch.cuda.synchronize()
    if not same_bytes(res, mlp(fresh.a, *args[1:])):
        fail("a CUDA graph of two gemm_fp8_gelu_tanh_fp8 replayed on new inputs: differs from eager")
    jitk.unconfigure(os_)
    print(f"ops: opcheck passed for {done} of {2 * len(cases)} variants; torch.compile(fullgraph=True) and "
          "a CUDA graph replayed on new inputs give eager's bytes")


def check_bad_input():
    x = Inputs(64, 3072, 3072, 7)
    cases = [
        ("K not a multiple of 16", lambda: ops.gemm_fp8(x.a[:, :3064].contiguous(), x.b[:, :3064].contiguous(),
                                                        x.a_scale, x.b_scale), "of 16"),
        ("N not a multiple of 16", lambda: ops.gemm_fp8(x.a, x.b[:3000], x.a_scale, x.b_scale),
         "of 16"),
        ("B not K-major", lambda: ops.gemm_fp8(x.a[:, :64].contiguous(), x.b[:64, :64].t(), x.a_scale, x.b_scale),
         "b"),
        ("A in bf16", lambda: ops.gemm_fp8(x.a.to(torch.bfloat16), x.b, x.a_scale, x.b_scale), "a"),
        ("K of A and B differ", lambda: ops.gemm_fp8(x.a, x.b[:, :1024].contiguous(), x.a_scale, x.b_scale),
         "b: expected shape"),
        ("rows % L", lambda: ops.gemm_fp8_gate_residual(x.a, x.b, x.a_scale, x.b_scale, x.bias,
                                                        torch.zeros(3, 3072, dtype=torch.bfloat16, device="cuda"),
                                                        torch.zeros(64, 3072, dtype=torch.bfloat16, device="cuda"), 20),
         "B x L"),
    ]
    for what, fn, word in cases:
        try:
            fn()
            torch.cuda.synchronize()
            fail(f"bad input accepted: {what}")
        except Exception as e:  # the op's ArgumentError / RuntimeError
            msg = str(e).splitlines()[0][:200]
            ok = word.lower() in msg.lower()
            print(f"| {what} | {'ok' if ok else 'UNCLEAR'} | {msg} |")
            if not ok:
                fail(f"bad input {what}: message does not say '{word}': {msg}")
    # M = 0: nothing launched, an empty result
    e = ops.gemm_fp8(x.a[:0], x.b, x.a_scale, x.b_scale)
    torch.cuda.synchronize()
    if tuple(e.shape) != (0, 3072):
        fail(f"M = 0 gave shape {tuple(e.shape)}")


def graph_time(fn, sets, reps=20, rounds=5):
    """us per call: a CUDA graph of reps calls rotating over the input sets,
    replayed rounds times; the best replay."""
    for s in sets:
        fn(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for i in range(reps):
            fn(sets[i % len(sets)])
    best = math.inf
    for _ in range(rounds):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        best = min(best, a.elapsed_time(b) * 1000 / reps)
    return best


def perf(args):
    rows = []
    peak = 1979.0
    for m in (4096, 512):
        for n, k in SHAPES:
            sets = [Inputs(m, n, k, 100 + i) for i in range(3)]
            outs = [torch.empty(m, n, dtype=torch.bfloat16, device="cuda") for _ in sets]
            for i, s in enumerate(sets):
                s.out = outs[i]
            tj = graph_time(lambda s: ops.gemm_fp8.out(s.a, s.b, s.a_scale, s.b_scale, out=s.out), sets)
            tc = graph_time(lambda s: torch._scaled_mm(s.a, s.b.t(), s.a_scale, s.b_scale,
                                                       out_dtype=torch.bfloat16, out=s.out), sets)
            fl = 2.0 * m * n * k
            rows.append((m, n, k, tc, tj, tc / tj, fl / tj / 1e6, fl / tj / 1e6 / peak * 100))
    print("\n| M | N | K | cuBLAS us | jitk us | ratio | jitk TFLOPS | % of dense FP8 peak |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print("| %d | %d | %d | %.1f | %.1f | %.2f | %.0f | %.0f |" % r)
    gm = math.exp(sum(math.log(r[5]) for r in rows) / len(rows))
    print(f"\ngeometric mean ratio {gm:.3f}, lowest {min(r[5] for r in rows):.3f}")

    # MLP-up with GELU-tanh + fp8 quant: fused vs _scaled_mm(bias) + the best torch.compile
    m, n, k = 4096, 12288, 3072
    sets = [Inputs(m, n, k, 200 + i) for i in range(3)]
    os_ = torch.tensor([0.4754464328289032], device="cuda")
    jitk.configure("gemm_fp8_gelu_tanh_fp8", "out_scale", os_)
    jitk.configure("gelu_tanh_quant_fp8", "out_scale", os_)
    for s in sets:
        s.q = torch.empty(m, n, dtype=E4M3, device="cuda")
        s.d = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")

    def gelu_quant(d, scale):
        v = d.float()
        gl = (0.5 * v * (1.0 + torch.tanh(0.7978845608 * (v + 0.044715 * v * v * v)))).to(torch.bfloat16)
        return (gl.float() / scale).clamp(-448.0, 448.0).to(E4M3)

    t0 = time.time()
    compiled = torch.compile(gelu_quant, mode="max-autotune-no-cudagraphs")
    for s in sets:
        compiled(s.d, os_)
    torch.cuda.synchronize()
    ctime = time.time() - t0
    t_fused = graph_time(lambda s: ops.gemm_fp8_gelu_tanh_fp8.out(s.a, s.b, s.a_scale, s.b_scale, s.bias,
                                                                  os_, q=s.q), sets)
    t_split = graph_time(lambda s: (ops.gemm_fp8_bias.out(s.a, s.b, s.a_scale, s.b_scale, s.bias, out=s.d),
                                    ops.gelu_tanh_quant_fp8.out(s.d, os_, q=s.q)), sets)
    t_torch = graph_time(lambda s: compiled(torch._scaled_mm(s.a, s.b.t(), s.a_scale, s.b_scale, bias=s.bias,
                                                             out_dtype=torch.bfloat16), os_), sets)
    t_cub = graph_time(lambda s: torch._scaled_mm(s.a, s.b.t(), s.a_scale, s.b_scale, bias=s.bias,
                                                  out_dtype=torch.bfloat16, out=s.d), sets)
    print("\n| MLP-up 4096 x 12288 x 3072 + GELU-tanh + fp8 | us |")
    print("|---|---|")
    print(f"| jitk fused (gemm_fp8_gelu_tanh_fp8) | {t_fused:.1f} |")
    print(f"| jitk split (gemm_fp8_bias + gelu_tanh_quant_fp8) | {t_split:.1f} |")
    print(f"| _scaled_mm + torch.compile max-autotune-no-cudagraphs GELU+quant | {t_torch:.1f} |")
    print(f"| _scaled_mm alone (bias, bf16) | {t_cub:.1f} |")
    print(f"\nfused vs torch: {t_torch / t_fused:.2f}x; fused vs split {t_split / t_fused:.2f}x "
          f"(torch.compile of the elementwise part took {ctime:.0f} s)")
    jitk.unconfigure(os_)

    # gate_residual: fused vs split, at the block's shapes
    print("\n| gate_residual M x N x K | fused us | split us | split / fused |")
    print("|---|---|---|---|")
    for m, n, k in ((4096, 3072, 3072), (4096, 3072, 12288), (512, 3072, 3072), (512, 3072, 12288)):
        sets = [Inputs(m, n, k, 300 + i) for i in range(3)]
        for s in sets:
            s.gate_residual(1, 7)
            s.out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
            s.d = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
        tf = graph_time(lambda s: ops.gemm_fp8_gate_residual.out(s.a, s.b, s.a_scale, s.b_scale, s.bias, s.gate,
                                                                 s.residual, s.L, out=s.out), sets)
        ts = graph_time(lambda s: (ops.gemm_fp8_bias.out(s.a, s.b, s.a_scale, s.b_scale, s.bias, out=s.d),
                                   ops.gate_residual.out(s.d, s.gate, s.residual, s.L, out=s.out)), sets)
        print(f"| {m} x {n} x {k} | {tf:.1f} | {ts:.1f} | {ts / tf:.2f} |")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--no-perf", action="store_true")
    p.add_argument("--no-check", action="store_true")
    args = p.parse_args()
    assert jitk.ops_error is None, jitk.ops_error
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    if not args.no_check:
        accuracy = []
        shapes = [(127, 3072, 3072)] if args.quick else [(m, n, k) for n, k in SHAPES for m in MS]
        t0 = time.time()
        for i, (m, n, k) in enumerate(shapes):
            check_shape(m, n, k, 1000 + i, accuracy, cublas=not args.quick)
        print(f"\nchecked {len(shapes)} shapes in {time.time() - t0:.1f} s")
        check_gelu_every_value()
        print("\n| shape | epilogue | jitk rel L2 | jitk max bf16 ulp | _scaled_mm rel L2 | _scaled_mm max ulp "
              "| values differing from _scaled_mm (of the rows checked) |")
        print("|---|---|---|---|---|---|---|")
        for a in accuracy:
            print("| %s | %s | %.3g | %.2f | %.3g | %.2f | %d |" % a)
        if not args.quick:
            print("\n| bad input | named | message |\n|---|---|---|")
            check_bad_input()
            check_ops()
    if not args.no_perf and not args.quick:
        perf(args)
    print(f"\n{len(failures)} checks failed" if failures else "\nall checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
