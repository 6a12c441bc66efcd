"""The generated PyTorch ops on the CPU (skipped without PyTorch): the
test family (tests/families, YAML only) becomes torch.ops.jitk.tadd3 /
.out ... with no Python change; a CPU reference kernel registered here
stands in for the CUDA one, so that the schemas, the fake kernels, the
mutation annotations and the eager path are checked by
torch.library.opcheck and torch.compile(fullgraph=True) without a GPU.
Shapes on the Meta device come from the spec's shape expressions."""
import os
import sys
import unittest

ROOT = os.environ.get("JITK_TEST_ROOT", os.getcwd())
os.environ["JITK_SPECS"] = os.path.join(ROOT, "specs") + ":" + os.path.join(ROOT, "tests",
                                                                            "families", "specs")
if not os.environ.get("JITK_TEST_INSTALLED"):
    sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
try:
    import torch
except ImportError:
    torch = None
import jitk  # noqa: E402


@unittest.skipIf(torch is None, "needs PyTorch")
class TorchCpuTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        def tadd3_out(x, y, z, *, out):
            out.copy_(x + y + z)

        def tadd_acc_out(acc, z, sx=0):
            acc.add_(z)
        cls.lib = torch.library.Library("jitk", "IMPL")
        cls.lib.impl("tadd3", lambda x, y, z: x + y + z, "CPU")
        cls.lib.impl("tadd3.out", tadd3_out, "CPU")
        cls.lib.impl("tadd_acc", lambda acc, z, sx=0: acc + z, "CPU")
        cls.lib.impl("tadd_acc.out", tadd_acc_out, "CPU")

    def inputs(self, rows=7):
        x = torch.randint(-1000, 1000, (rows, 256), dtype=torch.int32)
        return x, x * 3 + 1, x - 7

    def test_every_symbol_is_an_op(self):
        self.assertIsNone(jitk.ops_error)
        for name in ("fused_norm_scale_shift_fp8", "static_quant_fp8", "tadd3", "tadd2", "tadd_acc"):
            packet = getattr(torch.ops.jitk, name)
            self.assertEqual(sorted(packet.overloads()), ["default", "out"])
            self.assertTrue(hasattr(jitk.ops, name) and hasattr(jitk.ops.out, name))
        self.assertEqual(str(torch.ops.jitk.tadd_acc.out._schema),
                         "jitk::tadd_acc.out(Tensor(a!) acc, Tensor z, int sx=0) -> ()")

    def test_meta_shapes(self):
        x = torch.empty(5, 3072, dtype=torch.bfloat16, device="meta")
        h = torch.empty(3072, dtype=torch.bfloat16, device="meta")
        s = torch.empty(1, device="meta")
        y, q = torch.ops.jitk.fused_norm_scale_shift_fp8(x, h, h, s)
        self.assertEqual((y.shape, y.dtype, q.shape, q.dtype),
                         ((5, 3072), torch.bfloat16, (5, 3072), torch.float8_e4m3fn))
        y, r = torch.ops.jitk.fused_scale_residual_norm_scale_shift(x, x, h, h, h)
        self.assertEqual((r.shape, r.device.type), ((5, 3072), "meta"))
        self.assertEqual(torch.ops.jitk.static_quant_fp8(x.view(-1), s).shape, (15360,))

    def test_opcheck(self):
        from torch.library import opcheck
        x, y, z = self.inputs()
        for op, args, kw in ((torch.ops.jitk.tadd3.default, (x, y, z), {}),
                             (torch.ops.jitk.tadd3.out, (x, y, z), {"out": torch.empty_like(x)}),
                             (torch.ops.jitk.tadd_acc.default, (x, z), {}),
                             (torch.ops.jitk.tadd_acc.out, (x.clone(), z), {})):
            res = opcheck(op, args, kw)
            self.assertEqual(set(res.values()), {"SUCCESS"}, (op, res))

    def test_eager_path_and_compile(self):
        def f(x, y, z):
            a = jitk.ops.tadd3(x, y, z)
            b = torch.ops.jitk.tadd_acc(a, z)
            o = torch.empty_like(a)
            jitk.ops.out.tadd3(a, b, z, out=o)
            jitk.ops.out.tadd_acc(o, x)
            return o * 2
        x, y, z = self.inputs()
        a = x + y + z
        want = (a + (a + z) + z + x) * 2
        self.assertTrue(torch.equal(f(x, y, z), want))
        for dynamic in (False, True):
            torch._dynamo.reset()
            graphs = []

            def backend(gm, example_inputs):
                graphs.append(gm)
                return gm.forward
            cf = torch.compile(f, fullgraph=True, dynamic=dynamic, backend=backend)
            self.assertTrue(torch.equal(cf(x, y, z), want))
            self.assertEqual(len(graphs), 1)  # one graph: no break
            ops = [str(n.target) for n in graphs[0].graph.nodes if n.op == "call_function"]
            self.assertIn("jitk.tadd3.default", ops)
            self.assertIn("jitk.tadd3.out", ops)
        cf = torch.compile(f, fullgraph=True, dynamic=True, backend="aot_eager")
        x, y, z = self.inputs(rows=9)
        self.assertTrue(torch.equal(cf(x, y, z), f(x, y, z)))


if __name__ == "__main__":
    unittest.main(verbosity=2)
