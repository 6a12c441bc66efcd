"""One dual-stream Qwen-Image transformer block at the model's shapes, end
to end, in the configurations below, measured in one run (CUDA-graph replay of
one block on the GPU):

  (a) eager PyTorch: LayerNorm, modulation and fp8 quantization as
      separate ops, diffusers-style QK-RMSNorm + RoPE, cat/transpose
      around attention;
  (b) torch.compile of (a): mode default, and max-autotune-no-cudagraphs;
  (c) eager with jitk ops: fused norm + modulation + fp8 at both norm sites
      (the second with the gated residual), the fused QK-RMSNorm + RoPE
      written into the attention layout, and jitk's static fp8 quantizer
      for the attention output and the GELU output;
  (d) torch.compile(fullgraph=True) of (c): mode default, and
      max-autotune-no-cudagraphs (as (b)'s, with its GEMM autotuning);
      the GELU output's quantization is left to Inductor there (it fuses
      it with the GELU into one kernel);
  (e) (c) with every FP8 GEMM jitk's own (specs/gemm_fp8.yaml), each
      with its epilogue fused: bias, gated residual, GELU-tanh + the next
      linear's fp8 quantization; (E) torch.compile(fullgraph=True) of it.

Shapes: dim 3072, 24 heads x 128, MLP 12288 with GELU-tanh, 4096 image +
512 text tokens, batch 1; random weights; per-block modulation from a
timestep embedding (SiLU, Linear to 6 x dim, per stream); every linear in
FP8 e4m3 through torch._scaled_mm with static per-tensor input scales;
joint attention with SDPA.

    python3 examples/qwen_image_block.py            # all four, a table
    python3 examples/qwen_image_block.py --check    # (c), (e) fused == split, bytes
    python3 examples/qwen_image_block.py --only cd  # some: a, b, B (b max-autotune), c, d, D

The QK-norm + RoPE op: qk_norm_rope_out, which writes q, k (and a copy of
v) straight into the joint heads-first layout SDPA reads, so (c) and (d)
have no concatenation or transpose before attention. --qk-symbol NAME
names another symbol of that form; when torch.ops.jitk has no such op,
(c) and (d) use the PyTorch code of (a) for that step and say so.

Cold start: run once with JITK_CACHE_DIR pointing to an empty directory,
and once more with the cache it filled (or one `jitk precompile` made); the
script prints the first call's time of each configuration (torch.compile's
includes its compile).
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
import torch.nn.functional as F  # noqa: E402

import jitk  # noqa: E402

DIM, HEADS, HD, MLP = 3072, 24, 128, 12288
IMG, TXT = 4096, 512
FP8 = torch.float8_e4m3fn
BF16 = torch.bfloat16
EPS = 1e-6


# ------------------------------------------------------------- weights

class Linear8:
    """A linear layer in fp8: weight [out, in] e4m3 with a per-tensor
    scale; a static input scale; bf16 out (torch._scaled_mm)."""

    def __init__(self, fin, fout, g):
        w = torch.randn(fout, fin, device="cuda", generator=g) / fin ** 0.5
        self.w_scale = (w.abs().max() / 448.0).float().reshape(())
        self.w = (w / self.w_scale).to(FP8)
        self.b = (torch.randn(fout, device="cuda", generator=g) * 0.02).to(BF16)
        # static: calibrated offline in a real model; here from a unit input
        self.in_scale = torch.tensor([4.0 / 448.0], device="cuda")
        self.w_scale1 = self.w_scale.reshape(1)  # jitk's GEMM takes scales as [1]

    def __call__(self, q):
        """q: the fp8 input, already quantized with self.in_scale."""
        return torch._scaled_mm(q, self.w.t(), scale_a=self.in_scale.reshape(()),
                                scale_b=self.w_scale, bias=self.b, out_dtype=BF16)


class Stream:
    """One stream's weights (image or text)."""

    def __init__(self, g):
        self.mod_w = (torch.randn(6 * DIM, DIM, device="cuda", generator=g) / DIM ** 0.5).to(BF16)
        self.mod_b = (torch.randn(6 * DIM, device="cuda", generator=g) * 0.02).to(BF16)
        self.qkv = Linear8(DIM, 3 * DIM, g)
        self.out = Linear8(DIM, DIM, g)
        self.fc1 = Linear8(DIM, MLP, g)
        self.fc2 = Linear8(MLP, DIM, g)
        self.norm_q = (1 + 0.1 * torch.randn(HD, device="cuda", generator=g)).to(BF16)
        self.norm_k = (1 + 0.1 * torch.randn(HD, device="cuda", generator=g)).to(BF16)


def rope_table(n, offset=0):
    """cos/sin [n, HD/2] fp32 for positions offset.. (a 1-D RoPE stand-in
    for Qwen-Image's 3-D one: the same kernel work)."""
    inv = 1.0 / (10000 ** (torch.arange(0, HD, 2, device="cuda").float() / HD))
    t = torch.arange(offset, offset + n, device="cuda").float()
    f = torch.outer(t, inv)
    return torch.cat([f.cos(), f.sin()], dim=1).contiguous()  # [n, HD]: cos | sin


# ------------------------------------------------------ shared pieces

def quant_torch(x, s):
    return (x.float() / s).clamp(-448.0, 448.0).to(FP8)


def modulation(st, temb):
    m = F.linear(F.silu(temb), st.mod_w, st.mod_b)  # [1, 6 * DIM]
    return [c.reshape(DIM) for c in m.chunk(6, dim=-1)]  # shift1, scale1, gate1, shift2, ...


def qk_norm_rope_torch(q, k, wq, wk, cs):
    """diffusers-style: RMSNorm over each head (weight applied to the bf16
    normalized values), then the rotary embedding on interleaved pairs
    (2i, 2i + 1), as Qwen-Image's complex multiplication does."""
    def rms(t, w):
        tf = t.float()
        return (tf * torch.rsqrt(tf.pow(2).mean(-1, keepdim=True) + EPS)).to(BF16) * w

    def rot(t):
        c, s = cs[:, None, :HD // 2], cs[:, None, HD // 2:]
        a, b = t[..., 0::2].float(), t[..., 1::2].float()
        return torch.stack([a * c - b * s, a * s + b * c], dim=-1).flatten(-2).to(BF16)
    return rot(rms(q, wq)), rot(rms(k, wk))


QK_SYMBOL = "qk_norm_rope_out"


def have_qk_op():
    return hasattr(torch.ops.jitk, QK_SYMBOL)


def have_gemm_op():
    return hasattr(torch.ops.jitk, "gemm_fp8_gate_residual")


def joint_heads():
    """q, k, v buffers in the layout attention reads: heads first,
    [HEADS, TXT + IMG, HD], text tokens then image tokens."""
    return [torch.empty(HEADS, TXT + IMG, HD, device="cuda", dtype=BF16) for _ in range(3)]


def stream_view(buf, name):
    """One stream's [tokens, HEADS, HD] view of a joint heads-first
    buffer (strides [HD, (TXT + IMG) HD, 1])."""
    lo, n = (0, TXT) if name == "txt" else (TXT, IMG)
    return buf[:, lo:lo + n].transpose(0, 1)


def jitk_qk_norm_rope(qkv, wq, wk, cs, outs, split=False):
    """The fused QK-RMSNorm + RoPE out of place: from the packed QKV
    projection's views into the joint attention layout (q, k normalized
    and rotated, v copied): no concatenation or transpose after it.
    split=True runs jitk's split path instead (copy_heads, then
    rms_norm_heads and rope in place there): the same bytes."""
    q, k, v = qkv[:, 0], qkv[:, 1], qkv[:, 2]
    qo, ko, vo = outs
    if not split:
        getattr(jitk.ops.out, QK_SYMBOL)(q=q, k=k, v=v, q_weight=wq, k_weight=wk, cos_sin=cs,
                                         q_out=qo, k_out=ko, v_out=vo)
        return
    for dst, src in ((qo, q), (ko, k), (vo, v)):
        jitk.ops.out.copy_heads(src=src, dst=dst)
    rt = jitk.runtime()
    rt.call("rms_norm_heads[span=head,weight=true]", "strict", q=qo, k=ko, q_weight=wq,
            k_weight=wk, stream=torch.cuda.current_stream().cuda_stream)
    rt.call("rope[style=interleaved,positions=none]", "strict", q=qo, k=ko, cos_sin=cs,
            stream=torch.cuda.current_stream().cuda_stream)


# ------------------------------------------------------------- blocks

def attention(img_q, img_k, img_v, txt_q, txt_k, txt_v):
    """Joint attention: [text, image] along the sequence, SDPA."""
    q = torch.cat([txt_q, img_q], 0).transpose(0, 1)[None]  # [1, H, N, D]
    k = torch.cat([txt_k, img_k], 0).transpose(0, 1)[None]
    v = torch.cat([txt_v, img_v], 0).transpose(0, 1)[None]
    o = F.scaled_dot_product_attention(q, k, v)
    o = o[0].transpose(0, 1).reshape(TXT + IMG, DIM)
    return o[TXT:], o[:TXT]  # image, text


def block_a(p, img, txt, temb):
    """(a): eager PyTorch, everything as separate ops."""
    outs = {}
    heads = {}
    mods = {}
    for name, x, st, cs in (("img", img, p.img, p.cs_img), ("txt", txt, p.txt, p.cs_txt)):
        sh1, sc1, g1, sh2, sc2, g2 = modulation(st, temb)
        mods[name] = (g1, sh2, sc2, g2)
        h = F.layer_norm(x, (DIM,), eps=EPS) * (1 + sc1) + sh1
        qkv = st.qkv(quant_torch(h, st.qkv.in_scale)).view(-1, 3, HEADS, HD)
        q, k = qk_norm_rope_torch(qkv[:, 0], qkv[:, 1], st.norm_q, st.norm_k, cs)
        heads[name] = (q, k, qkv[:, 2])
    a_img, a_txt = attention(*heads["img"], *heads["txt"])
    for name, x, st, a in (("img", img, p.img, a_img), ("txt", txt, p.txt, a_txt)):
        g1, sh2, sc2, g2 = mods[name]
        o = st.out(quant_torch(a, st.out.in_scale))
        x = x + g1 * o
        h = F.layer_norm(x, (DIM,), eps=EPS) * (1 + sc2) + sh2
        m = F.gelu(st.fc1(quant_torch(h, st.fc1.in_scale)), approximate="tanh")
        outs[name] = x + g2 * st.fc2(quant_torch(m, st.fc2.in_scale))
    return outs["img"], outs["txt"]


def make_block_c(fused=True, qk_op=True, gelu_quant="jitk"):
    """(c): jitk ops at both norm sites and the attention output's
    quantizer; fused=False runs jitk's split path (norm, then quantizer)
    for the byte-identity check. gelu_quant: "jitk" quantizes the GELU
    output with jitk's static quantizer (one kernel where PyTorch eager
    runs four); "torch" keeps (a)'s PyTorch code there, for torch.compile,
    which fuses the GELU and the quantization into one kernel (jitk has no
    GELU family)."""
    ops = jitk.ops

    def norm1(x, sc, sh, s):
        if fused:
            return ops.fused_norm_scale_shift_fp8(x, sc, sh, s)
        y = ops.fused_norm_scale_shift(x, sc, sh)
        return y, ops.static_quant_fp8(y.view(-1), s).view(y.shape)

    def norm2(x, res, g, sc, sh, s):
        if fused:
            return ops.fused_scale_residual_norm_scale_shift_fp8(x, res, g, sc, sh, s)
        y, r = ops.fused_scale_residual_norm_scale_shift(x, res, g, sc, sh)
        return y, ops.static_quant_fp8(y.view(-1), s).view(y.shape), r

    def block_c(p, img, txt, temb):
        outs, heads, mods = {}, {}, {}
        joint = joint_heads() if qk_op else None
        for name, x, st, cs in (("img", img, p.img, p.cs_img), ("txt", txt, p.txt, p.cs_txt)):
            sh1, sc1, g1, sh2, sc2, g2 = modulation(st, temb)
            mods[name] = (g1, sh2, sc2, g2)
            _, q8 = norm1(x, sc1, sh1, st.qkv.in_scale)
            qkv = st.qkv(q8).view(-1, 3, HEADS, HD)
            if qk_op:
                jitk_qk_norm_rope(qkv, st.norm_q, st.norm_k, cs,
                                  [stream_view(b, name) for b in joint], split=not fused)
            else:
                q, k = qk_norm_rope_torch(qkv[:, 0], qkv[:, 1], st.norm_q, st.norm_k, cs)
                heads[name] = (q, k, qkv[:, 2])
        if qk_op:  # already in the layout attention reads
            o = F.scaled_dot_product_attention(*(b[None] for b in joint))
            o = o[0].transpose(0, 1).reshape(TXT + IMG, DIM)
            a_img, a_txt = o[TXT:], o[:TXT]
        else:
            a_img, a_txt = attention(*heads["img"], *heads["txt"])
        for name, x, st, a in (("img", img, p.img, a_img), ("txt", txt, p.txt, a_txt)):
            g1, sh2, sc2, g2 = mods[name]
            o = st.out(ops.static_quant_fp8(a.contiguous().view(-1), st.out.in_scale).view(a.shape))
            _, q8, x = norm2(o, x, g1, sc2, sh2, st.fc1.in_scale)
            m = F.gelu(st.fc1(q8), approximate="tanh")
            m8 = ops.static_quant_fp8(m.view(-1), st.fc2.in_scale).view(m.shape) \
                if gelu_quant == "jitk" else quant_torch(m, st.fc2.in_scale)
            outs[name] = x + g2 * st.fc2(m8)
        return outs["img"], outs["txt"]
    return block_c


def make_block_e(fused=True):
    """(e): (c) with every FP8 GEMM jitk's (specs/gemm_fp8.yaml), its
    epilogue fused: the QKV projection with its bias; the attention
    output's projection with the gated residual (x + g1 * o), then jitk's
    norm without residual; the MLP's first linear with GELU-tanh and the
    next linear's fp8 quantization; the second with the gated residual.
    fused=False: the same GEMMs with the bias epilogue and jitk's
    elementwise kernels after them (the split path, byte-identical)."""
    ops = jitk.ops

    def lin(L, a8):
        return ops.gemm_fp8_bias(a8, L.w, L.in_scale, L.w_scale1, L.b)

    def gate_res(L, a8, gate, res):
        g = gate.view(1, DIM)
        if fused:
            return ops.gemm_fp8_gate_residual(a8, L.w, L.in_scale, L.w_scale1, L.b, g, res,
                                              res.shape[0])
        return ops.gate_residual(lin(L, a8), g, res, res.shape[0])

    def gelu8(L, a8, out_scale):
        if fused:
            return ops.gemm_fp8_gelu_tanh_fp8(a8, L.w, L.in_scale, L.w_scale1, L.b, out_scale)
        return ops.gelu_tanh_quant_fp8(lin(L, a8), out_scale)

    def block_e(p, img, txt, temb):
        outs, mods = {}, {}
        joint = joint_heads()
        for name, x, st, cs in (("img", img, p.img, p.cs_img), ("txt", txt, p.txt, p.cs_txt)):
            sh1, sc1, g1, sh2, sc2, g2 = modulation(st, temb)
            mods[name] = (g1, sh2, sc2, g2)
            _, q8 = ops.fused_norm_scale_shift_fp8(x, sc1, sh1, st.qkv.in_scale)
            qkv = lin(st.qkv, q8).view(-1, 3, HEADS, HD)
            jitk_qk_norm_rope(qkv, st.norm_q, st.norm_k, cs, [stream_view(b, name) for b in joint])
        o = F.scaled_dot_product_attention(*(b[None] for b in joint))
        o = o[0].transpose(0, 1).reshape(TXT + IMG, DIM)
        for name, x, st, a in (("img", img, p.img, o[TXT:]), ("txt", txt, p.txt, o[:TXT])):
            g1, sh2, sc2, g2 = mods[name]
            a8 = ops.static_quant_fp8(a.contiguous().view(-1), st.out.in_scale).view(a.shape)
            x = gate_res(st.out, a8, g1, x)
            _, q8 = ops.fused_norm_scale_shift_fp8(x, sc2, sh2, st.fc1.in_scale)
            m8 = gelu8(st.fc1, q8, st.fc2.in_scale)
            outs[name] = gate_res(st.fc2, m8, g2, x)
        return outs["img"], outs["txt"]
    return block_e


class Params:
    def __init__(self, seed=0):
        g = torch.Generator(device="cuda").manual_seed(seed)
        self.img, self.txt = Stream(g), Stream(g)
        self.cs_txt, self.cs_img = rope_table(TXT), rope_table(IMG, TXT)
        self.x_img = torch.randn(IMG, DIM, device="cuda", generator=g).to(BF16)
        self.x_txt = torch.randn(TXT, DIM, device="cuda", generator=g).to(BF16)
        self.temb = torch.randn(1, DIM, device="cuda", generator=g).to(BF16)
        for st in (self.img, self.txt):  # validated once, at "model load"
            for lin in (st.qkv, st.out, st.fc1, st.fc2):
                jitk.configure("fused_norm_scale_shift_fp8", "input_scale", lin.in_scale)
            if have_gemm_op():
                for sym in ("gemm_fp8_gelu_tanh_fp8", "gelu_tanh_quant_fp8"):
                    jitk.configure(sym, "out_scale", st.fc2.in_scale)


# ------------------------------------------------------------- timing

def graph_us(fn, reps=30):
    """Capture one call in a CUDA graph, replay it: median us per replay."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1000.0)
    return statistics.median(ts), g


def kernel_shares(g):
    """Per-kernel-class time of one graph replay (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            g.replay()
        torch.cuda.synchronize()
    cls = {"gemm": 0.0, "attention": 0.0, "norm/quant/rope": 0.0, "other": 0.0}
    for e in prof.key_averages():
        if e.device_type.name != "CUDA" and not getattr(e, "self_device_time_total", 0):
            continue
        t = getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0)
        n = e.key.lower()
        if any(w in n for w in ("flash", "fmha", "attention", "attn", "sdpa")):
            k = "attention"
        elif any(w in n for w in ("gemm", "xmma", "cutlass", "nvjet", "scaled_mm", "sm90_")):
            k = "gemm"
        elif any(w in n for w in ("norm", "quant", "rope", "rotary", "rsqrt", "jitk")):
            k = "norm/quant/rope"
        else:
            k = "other"
        cls[k] += t / 3.0
    return cls


def main():
    global QK_SYMBOL
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="abBcdDeE",
                    help="a, b, B (b with max-autotune-no-cudagraphs), c, d, D (d with it), "
                         "e (jitk's GEMMs too), E (torch.compile of e)")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--qk-symbol", default=QK_SYMBOL)
    ap.add_argument("--no-autotune", action="store_true", help="skip (b) max-autotune")
    a = ap.parse_args()
    QK_SYMBOL = a.qk_symbol
    if jitk.ops_error:
        raise SystemExit(f"jitk ops: {jitk.ops_error}")
    qk = have_qk_op()
    p = Params()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, jitk {jitk.version()}; "
          f"QK-norm+RoPE: {'jitk ' + QK_SYMBOL if qk else 'PyTorch (no jitk op ' + QK_SYMBOL + ')'}")
    args = (p, p.x_img, p.x_txt, p.temb)
    if a.check:
        f, s = make_block_c(True, qk)(*args), make_block_c(False, qk)(*args)
        torch.cuda.synchronize()
        same = all(torch.equal(u.view(torch.int16), v.view(torch.int16)) for u, v in zip(f, s))
        print(f"(c) fused vs (c) split: {'byte-identical' if same else 'DIFFERENT'}")
        ref = block_a(*args)
        rel = max(((u.float() - r.float()).norm() / r.float().norm()).item() for u, r in zip(f, ref))
        print(f"(c) vs (a): max relative L2 difference {rel:.2e}")
        if have_gemm_op() and qk:
            fe, se = make_block_e(True)(*args), make_block_e(False)(*args)
            torch.cuda.synchronize()
            same_e = all(torch.equal(u.view(torch.int16), v.view(torch.int16)) for u, v in zip(fe, se))
            print(f"(e) fused vs (e) split: {'byte-identical' if same_e else 'DIFFERENT'}")
            rel_e = max(((u.float() - r.float()).norm() / r.float().norm()).item() for u, r in zip(fe, ref))
            rel_ec = max(((u.float() - r.float()).norm() / r.float().norm()).item() for u, r in zip(fe, f))
            print(f"(e) vs (a): max relative L2 difference {rel_e:.2e}; (e) vs (c): {rel_ec:.2e}")
            same = same and same_e
        sys.exit(0 if same else 1)
    configs = []
    if "a" in a.only:
        configs.append(("(a) eager PyTorch", lambda: block_a(*args), None))
    if "b" in a.only:
        configs.append(("(b) torch.compile default", None, ("default", block_a)))
    if "B" in a.only and not a.no_autotune:
        configs.append(("(b) torch.compile max-autotune-no-cudagraphs", None,
                        ("max-autotune-no-cudagraphs", block_a)))
    c = make_block_c(True, qk)
    c_compiled = make_block_c(True, qk, gelu_quant="torch")
    if "c" in a.only:
        configs.append(("(c) eager with jitk ops", lambda: c(*args), None))
    if "d" in a.only:
        configs.append(("(d) torch.compile(fullgraph=True) of (c)", None, ("default", c_compiled)))
    if "D" in a.only and not a.no_autotune:
        configs.append(("(d) torch.compile(fullgraph=True) of (c), max-autotune-no-cudagraphs", None,
                        ("max-autotune-no-cudagraphs", c_compiled)))
    if have_gemm_op() and qk:
        e = make_block_e(True)
        if "e" in a.only:
            configs.append(("(e) eager with jitk ops and jitk's FP8 GEMMs, epilogues fused", lambda: e(*args),
                            None))
        if "E" in a.only:
            configs.append(("(E) torch.compile(fullgraph=True) of (e)", None, ("default", e)))
    rows = []
    for name, fn, comp in configs:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        if comp:
            mode, base = comp
            torch._dynamo.reset()
            # (d) must compile whole: fullgraph=True; (b) may break
            cf = torch.compile(base, mode=mode, fullgraph=base is not block_a)
            fn = (lambda cf=cf: cf(*args))
        fn()
        torch.cuda.synchronize()
        first = time.perf_counter() - t0
        us, g = graph_us(fn)
        sh = kernel_shares(g)
        rows.append((name, us, first, sh))
        print(f"{name}: {us:.0f} us per replay, first call {first:.2f} s", flush=True)
    print(f"\n{'configuration':<70} {'us/block':>9} {'first call s':>12} "
          f"{'gemm':>6} {'attn':>6} {'norm/q/rope':>11} {'other':>6}")
    for name, us, first, sh in rows:
        tot = sum(sh.values()) or 1.0
        print(f"{name:<70} {us:9.0f} {first:12.2f} " +
              " ".join(f"{100 * sh[k] / tot:5.1f}%".rjust(w) for k, w in
                       (("gemm", 6), ("attention", 6), ("norm/quant/rope", 11), ("other", 6))))
    st = jitk.runtime().stats()
    print(f"\njitk: {st['compiles']} compiles, {st['cache_hits']} cache hits "
          f"({st['compile_ms']:.0f} ms compiling, {st['load_ms']:.0f} ms resolving); "
          f"JITK_CACHE_DIR={os.environ.get('JITK_CACHE_DIR', '(default)')}")
    def best(tag):
        return min((us for n, us, _, _ in rows if n.startswith(tag)), default=None)
    if best("(a)") and best("(c)"):
        print(f"(a)/(c) = {best('(a)') / best('(c)'):.2f} (target >= 2)")
    for n, us, _, _ in rows:
        if n.startswith("(d)") and best("(b)"):
            print(f"best (b)/{n} = {best('(b)') / us:.2f} (target >= 1.08)")
        if n[:3] in ("(e)", "(E)") and best("(b)"):
            print(f"best (b)/{n} = {best('(b)') / us:.2f} (target >= 1.2)")


if __name__ == "__main__":
    main()
