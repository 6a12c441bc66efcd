"""The generated PyTorch ops on a GPU (the H200; skipped without CUDA):

    JITK_SPECS=specs:tests/families/specs python3 -m unittest -v tests/python/test_ops.py

- torch.library.opcheck passes for every op (functional and .out) of every
  symbol that runs here;
- a function of jitk ops compiles with torch.compile(fullgraph=True) with
  no graph break, and runs under mode="reduce-overhead" (CUDA graphs), its
  bytes equal to eager;
- jitk.ops (the eager path past the dispatcher) and torch.ops.jitk give
  the same bytes; the functional and out variants too; fused == split.
"""
import os
import sys
import unittest

ROOT = os.environ.get("JITK_TEST_ROOT", os.getcwd())
if not os.environ.get("JITK_TEST_INSTALLED"):
    sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
try:
    import torch
    HAVE_GPU = torch.cuda.is_available()
except ImportError:
    HAVE_GPU = False
import jitk  # noqa: E402


def bits(t):
    return t.view(torch.uint8) if t.element_size() == 1 else t.view(
        {2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def same(a, b):
    return torch.equal(bits(a), bits(b))


@unittest.skipUnless(HAVE_GPU, "needs PyTorch with CUDA")
class OpsTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        assert jitk.ops_error is None, jitk.ops_error
        g = torch.Generator(device="cuda").manual_seed(0)
        cls.g = g
        cls.s = torch.tensor([0.4754464328289032], device="cuda")
        jitk.configure("fused_norm_scale_shift_fp8", "input_scale", cls.s)

    def bf16(self, *shape, scale=1.0):
        return (torch.randn(*shape, device="cuda", generator=self.g) * scale).to(torch.bfloat16)

    def norm_args(self, name, rows=300, h=3072):
        """Sample arguments of a norm-family op by its schema."""
        x, res = self.bf16(rows, h), self.bf16(rows, h)
        vec = {n: self.bf16(h, scale=0.3) for n in ("gate", "scale", "shift")}
        args = []
        for a in getattr(torch.ops.jitk, name).default._schema.arguments:
            if a.name in ("x",):
                args.append(x)
            elif a.name == "residual":
                args.append(res)
            elif a.name in vec:
                args.append(vec[a.name])
            elif a.name == "input_scale":
                args.append(self.s)
            elif a.name == "eps":
                args.append(1e-6)
        return args

    def sample(self, name):
        """(args, kwargs for .out) for any registered op."""
        if name == "static_quant_fp8":
            x = self.bf16(4096 * 3)
            return [x, self.s], {"q": torch.empty(x.shape, dtype=torch.float8_e4m3fn, device="cuda")}
        if name.startswith("tadd"):
            i = lambda: torch.randint(-9, 9, (100, 256), device="cuda", dtype=torch.int32)  # noqa: E731
            if name == "tadd_acc":
                return [i(), i()], {}
            n = 3 if name == "tadd3" else 2
            return [i() for _ in range(n)], {"out": torch.empty(100, 256, dtype=torch.int32, device="cuda")}
        args = self.norm_args(name)
        outs = {}
        for a in getattr(torch.ops.jitk, name).out._schema.arguments:
            if a.kwarg_only:
                dt = torch.float8_e4m3fn if a.name == "q" else torch.bfloat16
                outs[a.name] = torch.empty(args[0].shape, dtype=dt, device="cuda")
        return args, outs

    def names(self):
        return sorted(n for n in jitk._ops.specs_registered)

    def test_opcheck_every_op(self):
        from torch.library import opcheck
        done = []
        for name in self.names():
            args, outs = self.sample(name)
            packet = getattr(torch.ops.jitk, name)
            for op, kw in ((packet.default, {}), (packet.out, outs)):
                a = [t.clone() if isinstance(t, torch.Tensor) else t for t in args]
                res = opcheck(op, a, kw)
                self.assertEqual(set(res.values()), {"SUCCESS"}, (name, op, res))
                done.append(str(op))
        print(f"\nopcheck: {len(done)} ops passed: {', '.join(done)}")

    def test_eager_path_equals_dispatcher_and_out(self):
        for name in self.names():
            args, outs = self.sample(name)
            packet = getattr(torch.ops.jitk, name)
            a = packet.default(*[t.clone() if isinstance(t, torch.Tensor) else t for t in args])
            b = getattr(jitk.ops, name)(*[t.clone() if isinstance(t, torch.Tensor) else t for t in args])
            a = a if isinstance(a, tuple) else (a,)
            b = b if isinstance(b, tuple) else (b,)
            for u, v in zip(a, b):
                self.assertTrue(same(u, v), name)
            if outs:
                getattr(jitk.ops.out, name)(*args, **outs)
                for u, v in zip(a, outs.values()):
                    self.assertTrue(same(u, v), name)

    def test_fused_equals_split(self):
        x, res, gate, scale, shift, _ = self.norm_args("fused_scale_residual_norm_scale_shift_fp8",
                                                       rows=127, h=5120)
        y, q, r = torch.ops.jitk.fused_scale_residual_norm_scale_shift_fp8(x, res, gate, scale, shift,
                                                                           self.s)
        y2, r2 = torch.ops.jitk.fused_scale_residual_norm_scale_shift(x, res, gate, scale, shift)
        q2 = torch.ops.jitk.static_quant_fp8(y2.view(-1), self.s).view(q.shape)
        self.assertTrue(same(y, y2) and same(q, q2) and same(r, r2))

    def block(self, x, scale, shift, s, res, gate):
        """norm sites and quantization the way a transformer block uses them"""
        y, q = torch.ops.jitk.fused_norm_scale_shift_fp8(x, scale, shift, s)
        h = (q.float() * s).to(torch.bfloat16) + y
        y2, q2, r = jitk.ops.fused_scale_residual_norm_scale_shift_fp8(h, res, gate, scale, shift, s)
        out = torch.empty(h.numel(), dtype=torch.float8_e4m3fn, device=h.device)
        torch.ops.jitk.static_quant_fp8.out(y2.view(-1), s, q=out)
        return y2 * 2, q2, r, out

    def test_compile_fullgraph_and_cuda_graphs(self):
        x, res, gate, scale, shift, _ = self.norm_args("fused_scale_residual_norm_scale_shift_fp8",
                                                       rows=4096)
        args = (x, scale, shift, self.s, res, gate)
        want = self.block(*args)
        torch._dynamo.reset()
        graphs = []

        def count(gm, example_inputs):
            graphs.append(gm)
            return gm.forward
        got = torch.compile(self.block, fullgraph=True, backend=count)(*args)
        self.assertEqual(len(graphs), 1)
        for u, v in zip(got, want):
            self.assertTrue(same(u, v))
        for mode in ("default", "reduce-overhead"):
            torch._dynamo.reset()
            f = torch.compile(self.block, fullgraph=True, mode=mode)
            for _ in range(3):  # warm-up, capture (reduce-overhead), replay
                got = f(*args)
            torch.cuda.synchronize()
            for u, v in zip(got, want):
                self.assertTrue(same(u, v), mode)
        print(f"\ntorch.compile(fullgraph=True): 1 graph; default and reduce-overhead "
              f"(CUDA graph replay) byte-identical to eager")

    def test_errors_name_the_argument(self):
        x, scale, shift, s, eps = self.norm_args("fused_norm_scale_shift_fp8", rows=4)
        with self.assertRaises(jitk.ArgumentError) as e:
            jitk.ops.fused_norm_scale_shift_fp8(x, scale[:-8], shift, s)
        self.assertIn("scale: expected shape [3072], got [3064]", str(e.exception))
        with self.assertRaises(jitk.ArgumentError) as e:
            torch.ops.jitk.fused_norm_scale_shift_fp8(x, scale, shift.cpu(), s)
        self.assertIn("shift is on the CPU", str(e.exception))


if __name__ == "__main__":
    unittest.main(verbosity=2)
