"""The PyTorch ops on the CPU (skipped without PyTorch or without the
package's extension, jitk._torch): the test families (tests/families and
tests/python/specs, YAML only) become torch.ops.jitk.tadd3 / .out ... with
no Python change; a CPU reference kernel registered here stands in for the
CUDA one, so that the schemas, the extension's Meta kernels, the mutation
annotations and the front end are checked by torch.library.opcheck and
torch.compile(fullgraph=True) without a GPU. Shapes on the Meta device
come from the spec's shape expressions."""
import os
import sys
import unittest

ROOT = os.environ.get("JITK_TEST_ROOT", os.getcwd())
os.environ["JITK_SPECS"] = ":".join(os.path.join(ROOT, *d) for d in (
    ("specs",), ("tests", "families", "specs"), ("tests", "python", "specs")))
if not os.environ.get("JITK_TEST_INSTALLED"):
    sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
try:
    import torch
except ImportError:
    torch = None
import jitk  # noqa: E402


HAVE_OPS = torch is not None and jitk.ops_error is None
WHY = "needs PyTorch and jitk._torch" if torch is None else f"no ops: {jitk.ops_error}"


@unittest.skipUnless(HAVE_OPS, WHY)
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


@unittest.skipIf(torch is None, "needs PyTorch")
class TorchDeviceAndConfiguredTests(unittest.TestCase):
    def test_torch_devices(self):
        # issue 22 #17: jitk.runtime(torch.device("cuda")) was an ArgumentTypeError
        from jitk import _core, _ops
        d = _core._device
        self.assertEqual(d(torch.device("cuda:2")), 2)
        self.assertEqual(d(torch.device("cuda")), d(None))  # the current device
        with self.assertRaises(jitk.ArgumentError) as e:
            d(torch.device("cpu"))
        self.assertEqual(e.exception.message, "device cpu is not a CUDA device")
        made = []

        class StandIn:  # the library's runtime needs a GPU
            def __init__(self, device=None):
                made.append(device)
        saved = (_ops._core.Runtime, dict(_ops._runtimes))
        _ops._core.Runtime = StandIn
        _ops._runtimes.clear()
        try:
            a = jitk.runtime(torch.device("cuda:1"))
            self.assertIs(jitk.runtime("cuda:1"), a)
            self.assertIs(jitk.runtime(1), a)
            jitk.runtime(torch.device("cuda"))
        finally:
            _ops._core.Runtime = saved[0]
            _ops._runtimes.clear()
            _ops._runtimes.update(saved[1])
        self.assertEqual(made, [1, d(None)])

    def test_a_write_since_configure_undoes_it(self):
        # issue 22 #16 on real version counters (Runtime.call's check; the
        # ops': jitk/_torch.cpp, on the GPU test_torch.py, test_ops.py)
        from jitk import _core
        rt = jitk.Runtime.__new__(jitk.Runtime)
        rt._h, rt.device = None, 0
        s = torch.tensor([0.5])
        with torch.inference_mode():
            frozen = torch.tensor([0.5])
        self.assertIsNone(_core._version_of(frozen))  # no counter: the reference only
        rt._configured = {s.data_ptr(): _core._version_of(s), frozen.data_ptr(): None}
        rt._configured_keep = {s.data_ptr(): s, frozen.data_ptr(): frozen}
        forgot = []
        saved = _core._unconfigure
        _core._unconfigure = lambda h, p: forgot.append(p) or 0
        rt._h = 1  # stood in (set back before it is freed)
        try:
            rt._check_configured(s)
            rt._check_configured(s[0:1])  # a view shares the counter
            rt._check_configured(frozen)
            self.assertEqual(forgot, [])
            s[0:1].fill_(-3.0)  # in place, through a view
            import warnings
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                rt._check_configured(s)
            self.assertEqual(forgot, [s.data_ptr()])
            self.assertIn("was written after configure", str(w[0].message))
            self.assertNotIn(s.data_ptr(), rt._configured)
            self.assertNotIn(s.data_ptr(), rt._configured_keep)
        finally:
            _core._unconfigure = saved
            rt._h = None


@unittest.skipUnless(HAVE_OPS, WHY)
class ExtensionTests(unittest.TestCase):
    """jitk._torch's kernels where no GPU runs them: the Meta kernel's
    shapes (symbolic ones too), the instance a shape program selects, and
    what the CUDA kernel refuses before it asks for a device."""

    def test_functional_shapes_from_the_selected_instance(self):
        # issue 26: y: [rows, hidden] from x: [rows, 2 * hidden], hidden in
        # {256, 512}: the instance whose input shapes match decides it
        spec = jitk._ops.specs_registered["tglu"]
        self.assertTrue(spec.select)
        for cols, want in ((512, 256), (1024, 512)):
            x = torch.empty(3, cols, dtype=torch.int32, device="meta")
            self.assertEqual(torch.ops.jitk.tglu(x).shape, (3, want))
        with self.assertRaisesRegex(ValueError, r"jitk::tglu: no instance takes these shapes "
                                    r"\(x \[3, 700\]\)"):
            torch.ops.jitk.tglu(torch.empty(3, 700, dtype=torch.int32, device="meta"))
        # the same on fake tensors with symbolic sizes (torch.compile's)
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.fx.experimental.symbolic_shapes import ShapeEnv
        with FakeTensorMode(shape_env=ShapeEnv()) as mode:
            x = mode.from_tensor(torch.empty(7, 1024, dtype=torch.int32))
            self.assertEqual(tuple(torch.ops.jitk.tglu(x).shape), (7, 512))

    def test_the_front_end_is_the_op(self):
        # generated functions where the front end was written (the shipped
        # families), the op itself for a family added as data
        self.assertIs(jitk.ops.tadd3, torch.ops.jitk.tadd3.default)
        self.assertIs(jitk.ops.out.tadd3, torch.ops.jitk.tadd3.out)
        if "norm_scale_shift" in jitk.ops.FAMILIES:
            f = jitk.ops.fused_norm_scale_shift_fp8
            self.assertEqual(f.__module__, "jitk.ops.norm_scale_shift")
            import inspect
            self.assertEqual(str(inspect.signature(f)),
                             "(x, scale, shift, input_scale, eps=9.99999997e-07)")
            self.assertIn("Schema: jitk::fused_norm_scale_shift_fp8(", f.__doc__)

    def test_cuda_kernel_refuses_before_the_device(self):
        # the CUDA kernel runs only for CUDA tensors; a CPU tensor among
        # them is named (the library is not reached: no GPU here)
        x = torch.zeros(4, 256, dtype=torch.int32)
        with self.assertRaises(NotImplementedError):  # no CPU kernel for tadd2
            torch.ops.jitk.tadd2(x, x)

    def test_watch_table(self):
        from jitk import _torch
        _torch.watch(3, 0x5000, 7)
        _torch.watch(3, 0x5000, 8)  # configured again: the newer version
        self.assertIn((3, 0x5000, 8), _torch.watched())
        _torch.unwatch(3, 0x5000)
        self.assertNotIn(0x5000, [w[1] for w in _torch.watched()])


if __name__ == "__main__":
    unittest.main(verbosity=2)
