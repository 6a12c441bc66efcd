"""The generated PyTorch ops on a GPU (the H200; skipped without CUDA):

    JITK_SPECS=specs:tests/families/specs python3 -m unittest -v tests/python/test_ops.py

- torch.library.opcheck passes for every op (functional and .out) of every
  symbol that runs here;
- a function of jitk ops compiles with torch.compile(fullgraph=True) with
  no graph break, and runs under mode="reduce-overhead" (CUDA graphs), its
  bytes equal to eager;
- jitk.ops (the generated front end, through the dispatcher) and torch.ops.jitk give
  the same bytes; the functional and out variants too; fused == split;
- with JITK_TORCH_ONE_BLOCK=1 a functional op's outputs share one block,
  do not overlap, and are the .out variant's bytes.
"""
import faulthandler
import os
import sys
import unittest

faulthandler.enable()  # a crash in a kernel prints the Python stack of every thread

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

    @classmethod
    def describe(cls):
        if not hasattr(cls, "_describe"):
            with jitk.Compiler(cache_dir="") as c:
                cls._describe = {d["name"]: d for d in c.describe()["symbols"]}
        return cls._describe

    def sample(self, name):
        """(args, kwargs for .out) for any registered op, from its spec:
        the first instance's parameters, typical sizes for the shapes'
        other names (rows = B x L, per-token modulation B = rows), data of
        each argument's dtype; the .out outputs allocated from their
        shapes."""
        from jitk import _shapes
        sym = self.describe()[name]
        inst = sym["instances"][0]["params"]
        env = {}
        for p in sym.get("params", []):
            v = inst.get(p["name"])
            env[p["name"]] = p["codes"][p["values"].index(v)] if p["type"] == "enum" else int(v)
        B = 256 if inst.get("modulation") == "per_token" else 2
        env.update(rows=256, n=3 * 4096, B=B, L=256 // B, H=3072, tokens=64, q_heads=4,
                   k_heads=4, heads=4, table_rows=64)
        for k, v in dict(cols=192, m=256, k=1024).items():  # where no parameter names them
            env.setdefault(k, v)
        if "head_dim" in env:
            env["rotary"] = env["head_dim"]
        if "hidden" not in env:
            env["hidden"] = 3072
        args_by = {a["name"]: a for a in sym["args"]}

        def shape_of(a):
            return [_shapes.evaluate(_shapes.parse(str(e)), env) for e in a["shape"]]

        def make(a):
            n, dt, shp = a["name"], a["dtype"], shape_of(a)
            if a.get("configured"):
                return self.s
            if dt == "bf16":
                return self.bf16(*shp, scale=0.3 if len(shp) == 1 else 1.0)
            if dt == "f32":
                return torch.rand(*shp, device="cuda", generator=self.g) * 2 - 1
            if dt == "fp8_e4m3":
                return (torch.randn(*shp, device="cuda", generator=self.g) * 4).to(torch.float8_e4m3fn)
            if dt == "u8":
                return torch.randint(0, 2, shp, device="cuda", dtype=torch.uint8, generator=self.g)
            if dt in ("i32", "i64"):
                hi = env.get("table_rows", 9) if "position" in n else 9
                lo = 0 if "position" in n else -9
                return torch.randint(lo, hi, shp, device="cuda", generator=self.g,
                                     dtype=torch.int32 if dt == "i32" else torch.int64)
            raise AssertionError(f"{name}: no sample for {n} ({dt})")
        dtypes = {"bf16": torch.bfloat16, "fp8_e4m3": torch.float8_e4m3fn, "f32": torch.float32,
                  "i32": torch.int32, "i64": torch.int64, "u8": torch.uint8}
        args, outs = [], {}
        for a in getattr(torch.ops.jitk, name).out._schema.arguments:
            spec = args_by.get(a.name)
            if a.kwarg_only:
                outs[a.name] = torch.empty(shape_of(spec), dtype=dtypes[spec["dtype"]], device="cuda")
            elif spec is not None and spec["kind"] == "tensor":
                args.append(make(spec) if spec["present"][0] else None)
            elif a.name in env:
                args.append(env[a.name])
            elif spec is not None and "default" in spec:
                args.append(spec["default"])
            else:
                args.append(a.default_value)
        return args, outs

    def copies(self, args):
        """Fresh copies of the tensor arguments, but the configured input
        scale itself: a copy would be a tensor jitk_configure never saw."""
        return [t.clone() if isinstance(t, torch.Tensor) and t is not self.s else t for t in args]

    def check_fake(self, op, args, kw):
        """The fake kernel's outputs have the real ones' shapes, strides
        and dtypes."""
        from torch._subclasses.fake_tensor import FakeTensorMode
        real = op(*self.copies(args), **kw)
        with FakeTensorMode() as mode:
            fa = [mode.from_tensor(t) if isinstance(t, torch.Tensor) else t for t in args]
            fk = {k: mode.from_tensor(v) for k, v in kw.items()}
            fake = op(*fa, **fk)
        real = real if isinstance(real, tuple) else (real,)
        fake = fake if isinstance(fake, tuple) else (fake,)
        self.assertEqual(len(real), len(fake), op)
        for r, f in zip(real, fake):
            if r is None:
                self.assertIsNone(f, op)
                continue
            self.assertEqual((r.shape, r.stride(), r.dtype), (f.shape, f.stride(), f.dtype), op)

    def check_mutation(self, op, args, kw):
        """What the schema says of mutation, bitwise: the inputs come back
        unchanged and every output the op declares mutable is written."""
        a = self.copies(args)
        before = [t.clone() if isinstance(t, torch.Tensor) else t for t in a]
        out = {k: torch.full_like(v.view(torch.uint8), 0x7f).view(v.dtype) for k, v in kw.items()}
        op(*a, **out)
        torch.cuda.synchronize()
        for t, u in zip(a, before):
            if isinstance(t, torch.Tensor):
                self.assertTrue(torch.equal(t.view(torch.uint8), u.view(torch.uint8)), op)
        for k, v in out.items():
            self.assertFalse(torch.equal(v.view(torch.uint8), torch.full_like(v.view(torch.uint8), 0x7f)),
                             (op, k))

    def callable_by_shapes(self, name, args, outs):
        """False when the symbol's instances differ in a parameter that no
        argument's shape tells (its op then says so, naming it)."""
        try:
            getattr(torch.ops.jitk, name).out(*args, **outs)
        except ValueError as e:
            if "no tensor argument tells" in str(e):
                return False
            raise
        return True

    def names(self):
        return sorted(n for n in jitk._ops.specs_registered)

    def test_opcheck_every_op(self):
        from torch.library import opcheck
        done = []
        need_selector = []
        for name in self.names():
            args, outs = self.sample(name)
            packet = getattr(torch.ops.jitk, name)
            if not self.callable_by_shapes(name, args, outs):
                need_selector.append(name)
                continue
            for op, kw in ((packet.default, {}), (packet.out, outs)):
                a = self.copies(args)
                utils = None
                configured = any(a.get("configured") for a in self.describe()[name]["args"])
                tensors = list(kw.values()) + [t for t in args if isinstance(t, torch.Tensor)]
                if configured or any(t.dtype == torch.float8_e4m3fn for t in tensors):
                    # PyTorch's schema check compares the arguments (fp8
                    # inputs too: the GEMM's a and b, seen on an H100)
                    # before and after with allclose, which has no fp8
                    # kernel ("mul_cuda" not implemented for Float8_e4m3fn),
                    # and runs the op on copies of its arguments (a copy of
                    # a configured scale was never configured); the
                    # mutation is checked by hand below instead
                    utils = ("test_autograd_registration", "test_faketensor",
                             "test_aot_dispatch_dynamic")
                    self.check_mutation(op, args, kw)
                    if configured and not self.describe()[name].get("fallback"):
                        # the fake-tensor and AOT checks run the real op on
                        # copies too: with no fallback to run instead, the
                        # fake kernel is compared with the real one by hand
                        utils = ("test_autograd_registration",)
                        self.check_fake(op, args, kw)
                res = opcheck(op, a, kw) if utils is None else opcheck(op, a, kw, test_utils=utils)
                self.assertEqual(set(res.values()), {"SUCCESS"}, (name, op, res))
                done.append(str(op) + ("" if utils is None else " (schema by hand)"))
        print(f"\nopcheck: {len(done)} ops passed: {', '.join(done)}")
        print(f"needing a selector (parameters no shape tells): {', '.join(need_selector) or 'none'}")
        self.assertGreater(len(done), 2 * 40)

    def test_eager_path_equals_dispatcher_and_out(self):
        for name in self.names():
            args, outs = self.sample(name)
            packet = getattr(torch.ops.jitk, name)
            if not self.callable_by_shapes(name, args, outs):
                continue
            a = packet.default(*self.copies(args))
            b = getattr(jitk.ops, name)(*self.copies(args))
            a = a if isinstance(a, tuple) else (a,)
            b = b if isinstance(b, tuple) else (b,)
            for u, v in zip(a, b):
                self.assertTrue(same(u, v), name)
            if outs:
                getattr(jitk.ops.out, name)(*args, **outs)
                for u, v in zip(a, outs.values()):
                    self.assertTrue(same(u, v), name)

    def test_one_block_outputs(self):
        """JITK_TORCH_ONE_BLOCK=1 (read at import, so in a process of its
        own): the two outputs of the functional norm share one block of the
        caching allocator, do not overlap, and are the .out variant's bytes;
        without it they do not share one."""
        import subprocess
        code = r"""
import os, sys
if not os.environ.get("JITK_TEST_INSTALLED"):
    sys.path.insert(0, os.path.join(os.environ["JITK_TEST_ROOT"], "bindings", "python"))
import torch, jitk
sym = "fused_norm_scale_shift_fp8"
s = torch.tensor([0.4754464328289032], device="cuda")
jitk.configure(sym, "input_scale", s)
g = torch.Generator(device="cuda").manual_seed(0)
x = torch.randn(300, 3072, device="cuda", generator=g).to(torch.bfloat16)
scale = (torch.randn(3072, device="cuda", generator=g) * 0.3).to(torch.bfloat16)
shift = (torch.randn(3072, device="cuda", generator=g) * 0.3).to(torch.bfloat16)
op = getattr(torch.ops.jitk, sym)
y1, q1 = op.default(x, scale, shift, s)
y, q = torch.empty_like(y1), torch.empty_like(q1)
op.out(x, scale, shift, s, y=y, q=q)
torch.cuda.synchronize()
same = torch.equal(y1.view(torch.int16), y.view(torch.int16)) and \
    torch.equal(q1.view(torch.uint8), q.view(torch.uint8))
shared = y1.untyped_storage().data_ptr() == q1.untyped_storage().data_ptr()
print(f"same {same} shared {shared} overlap {torch._C._overlaps(y1, q1)} "
      f"aligned {(q1.data_ptr() - y1.data_ptr()) % 256 == 0}")
"""
        env = dict(os.environ, JITK_TEST_ROOT=ROOT)
        for on in ("1", "0"):
            r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               timeout=600, env=dict(env, JITK_TORCH_ONE_BLOCK=on))
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn(f"same True shared {on == '1'} overlap False", r.stdout, r.stderr)
            if on == "1":
                self.assertIn("aligned True", r.stdout)

    def test_fused_equals_split(self):
        x, res, gate, scale, shift, _, _ = self.norm_args(
            "fused_scale_residual_norm_scale_shift_fp8", rows=127, h=5120)
        y, q, r = torch.ops.jitk.fused_scale_residual_norm_scale_shift_fp8(x, res, gate, scale, shift,
                                                                           self.s)
        y2, r2 = torch.ops.jitk.fused_scale_residual_norm_scale_shift(x, res, gate, scale, shift)
        q2 = torch.ops.jitk.static_quant_fp8(y2.view(-1), self.s).view(q.shape)
        self.assertTrue(same(y, y2) and same(q, q2) and same(r, r2))

    def block(self, x, scale, shift, s, res, gate):
        """norm sites and quantization the way a transformer block uses them"""
        # (the glue between the ops is exact in bf16 and in fp32, so that
        # Inductor's fusion of it, which rounds once where eager rounds
        # twice, cannot change a bit)
        y, q = torch.ops.jitk.fused_norm_scale_shift_fp8(x, scale, shift, s)
        h = y + y
        y2, q2, r = jitk.ops.fused_scale_residual_norm_scale_shift_fp8(h, res, gate, scale, shift, s)
        out = torch.empty(h.numel(), dtype=torch.float8_e4m3fn, device=h.device)
        torch.ops.jitk.static_quant_fp8.out(y2.view(-1), s, q=out)
        return y2 * 2, q, q2, r, out

    def test_compile_fullgraph_and_cuda_graphs(self):
        x, res, gate, scale, shift, _, _ = self.norm_args(
            "fused_scale_residual_norm_scale_shift_fp8", rows=4096)
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
        # the extension's errors: ValueError for what the library refuses
        # (EINVAL), naming the op, the status and the argument
        with self.assertRaises(ValueError) as e:
            jitk.ops.fused_norm_scale_shift_fp8(x, scale[:-8], shift, s)
        self.assertIn("jitk::fused_norm_scale_shift_fp8: EINVAL: ", str(e.exception))
        self.assertIn("scale: expected shape [3072], got [3064]", str(e.exception))
        with self.assertRaises(ValueError) as e:
            torch.ops.jitk.fused_norm_scale_shift_fp8(x, scale, shift.cpu(), s)
        self.assertIn("shift is on the CPU", str(e.exception))


    def test_configured_scale_guard_in_every_plan(self):
        # issue 22 #16 through the ops (the C plan, the libtorch plan, the
        # dispatcher's kernels): a write into a configured scale undoes its
        # validation; a configured scale's memory is not handed on
        import warnings
        x, scale, shift, _, _ = self.norm_args("fused_norm_scale_shift_fp8", rows=8)
        rt = jitk.runtime(torch.device("cuda"))  # issue 22 #17
        self.assertIs(jitk.runtime(f"cuda:{rt.device}"), rt)
        self.assertIs(jitk.runtime(rt.device), rt)

        def fused_launches():
            torch.cuda.synchronize()
            return rt.stats("fused_norm_scale_shift_fp8[hidden=3072]")["launches"]
        calls = (jitk.ops.fused_norm_scale_shift_fp8, torch.ops.jitk.fused_norm_scale_shift_fp8,
                 lambda *a: torch.ops.jitk.fused_norm_scale_shift_fp8.out(
                     *a, y=torch.empty_like(x), q=torch.empty(x.shape, dtype=torch.float8_e4m3fn,
                                                              device="cuda")))
        s = torch.tensor([0.5], device="cuda")
        jitk.configure("fused_norm_scale_shift_fp8", "input_scale", s)
        for call in calls:
            n = fused_launches()
            call(x, scale, shift, s)
            self.assertEqual(fused_launches(), n + 1)
            s.fill_(-3.0)
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                call(x, scale, shift, s)  # the split path
            self.assertEqual(fused_launches(), n + 1)
            self.assertIn("was written after configure", str(w[0].message))
            s.fill_(0.5)
            jitk.configure("fused_norm_scale_shift_fp8", "input_scale", s)
        # a filter that makes the warning an error: the call raises it and
        # launches nothing, and the scale stays unconfigured (the next call,
        # without the filter, takes the split path with no second warning)
        for call in calls:
            n = fused_launches()
            s.fill_(-3.0)
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                with self.assertRaisesRegex((RuntimeError, RuntimeWarning), "written after configure"):
                    call(x, scale, shift, s)
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                call(x, scale, shift, s)
            self.assertEqual(fused_launches(), n)
            self.assertEqual([m for m in w if "written after" in str(m.message)], [])
            s.fill_(0.5)
            jitk.configure("fused_norm_scale_shift_fp8", "input_scale", s)
        p = s.data_ptr()
        del s
        kept = [torch.tensor([-3.0], device="cuda") for _ in range(64)]
        self.assertNotIn(p, [k.data_ptr() for k in kept])  # still the configured scale's
        rt.unconfigure(p)
        del kept

    def test_front_end(self):
        # bench/device_run.sh writes the front end: jitk.ops' functions are
        # the generated ones (a family added as data: the op itself)
        self.assertEqual(jitk.ops.fused_norm_scale_shift_fp8.__module__,
                         "jitk.ops.norm_scale_shift")
        self.assertIs(jitk.ops.tadd3, torch.ops.jitk.tadd3.default)

    def test_selected_instance_gives_the_shape(self):
        # tests/python/specs/tglu.yaml: y: [rows, hidden] from x: [rows, 2 * hidden]
        if "tglu" not in jitk._ops.specs_registered:
            self.skipTest("JITK_SPECS without tests/python/specs")
        for hidden in (256, 512):
            x = torch.randint(-1000, 1000, (5, 2 * hidden), dtype=torch.int32, device="cuda")
            y = torch.ops.jitk.tglu(x)
            self.assertEqual(y.shape, (5, hidden))
            self.assertTrue(torch.equal(y, x[:, :hidden] + x[:, hidden:]))
            cf = torch.compile(lambda t: jitk.ops.tglu(t) * 2, fullgraph=True, dynamic=True)
            self.assertTrue(torch.equal(cf(x), y * 2))

    def test_eager_outputs_streams_and_capture(self):
        x, scale, shift, s, eps = self.norm_args("fused_norm_scale_shift_fp8", rows=333)
        op = jitk.ops.fused_norm_scale_shift_fp8
        want = torch.ops.jitk.fused_norm_scale_shift_fp8(x, scale, shift, s)
        y, q = op(x, scale, shift, s)
        for t, w in zip((y, q), want):
            self.assertEqual((t.shape, t.dtype, t.device, t.is_contiguous()),
                             (w.shape, w.dtype, w.device, True))
            self.assertTrue(same(t, w))
        with torch.inference_mode():
            y2, q2 = op(x, scale, shift, s)
        self.assertTrue(y2.is_inference() and same(y2, want[0]) and same(q2, want[1]))
        # a side stream: the kernel runs on the current stream (a graph
        # captured there holds it; a launch elsewhere would break capture)
        side = torch.cuda.Stream()
        yo, qo = torch.empty_like(y), torch.empty_like(q)
        g = torch.cuda.CUDAGraph()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            with torch.cuda.graph(g, stream=side):
                jitk.ops.out.fused_norm_scale_shift_fp8(x, scale, shift, s, y=yo, q=qo)
                yc, qc = op(x, scale, shift, s)
        torch.cuda.synchronize()
        yo.zero_()
        g.replay()
        torch.cuda.synchronize()
        for t, w in ((yo, want[0]), (qo, want[1]), (yc, want[0]), (qc, want[1])):
            self.assertTrue(same(t, w))
        # a subclass goes through the dispatcher: the same bytes
        class Sub(torch.Tensor):
            pass
        ys, qs = op(x.as_subclass(Sub), scale, shift, s)
        self.assertTrue(same(ys.as_subclass(torch.Tensor), want[0]))

    def test_eager_errors(self):
        x, scale, shift, s, eps = self.norm_args("fused_norm_scale_shift_fp8", rows=4)
        op = jitk.ops.fused_norm_scale_shift_fp8
        with self.assertRaisesRegex(ValueError, "shift is on the CPU, not cuda:0"):
            op(x, scale, shift.cpu(), s)
        with self.assertRaisesRegex(TypeError, "scale: dtype .* is not a kernel argument type"):
            op(x, scale.double(), shift, s)
        with self.assertRaisesRegex(ValueError, "scale"):  # the library's check
            op(x, scale.float(), shift, s)
        with self.assertRaisesRegex((TypeError, RuntimeError), "eps"):  # the schema's
            op(x, scale, shift, s, "1e-6")
        with self.assertRaisesRegex(ValueError, "q"):
            jitk.ops.out.fused_norm_scale_shift_fp8(x, scale, shift, s, y=torch.empty_like(x),
                                                    q=torch.empty(3, 3, device="cuda",
                                                                  dtype=torch.float8_e4m3fn))


    def test_eager_modes_and_misuse(self):
        x, scale, shift, s, eps = self.norm_args("fused_norm_scale_shift_fp8", rows=8)
        want = torch.ops.jitk.fused_norm_scale_shift_fp8(x, scale, shift, s)
        seen = []

        class Log(torch.overrides.TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                seen.append(str(func))
                return func(*args, **(kwargs or {}))
        with Log():  # an active mode sees the call (the dispatcher's path)
            y, q = jitk.ops.fused_norm_scale_shift_fp8(x, scale, shift, s)
        self.assertTrue(any("fused_norm_scale_shift_fp8" in f for f in seen), seen)
        self.assertTrue(same(y, want[0]) and same(q, want[1]))
        # a shape where .out wants a tensor: refused before any launch
        q2 = torch.zeros_like(q)
        with self.assertRaisesRegex((TypeError, RuntimeError), "y"):
            jitk.ops.out.fused_norm_scale_shift_fp8(x, scale, shift, s, y=tuple(x.shape), q=q2)
        torch.cuda.synchronize()
        self.assertEqual(int(q2.view(torch.uint8).count_nonzero()), 0)
        # a sparse tensor goes to the dispatcher (which names what it lacks)
        with self.assertRaises(Exception) as e:
            jitk.ops.fused_norm_scale_shift_fp8(x.to_sparse(), scale, shift, s)
        self.assertNotIsInstance(e.exception, SystemError)



@unittest.skipUnless(HAVE_GPU, "needs PyTorch with CUDA")
class HeaderPackageOpsTests(unittest.TestCase):
    """The families on header packages (CUB, CuTe + TMA descriptors) as torch
    ops: the bytes of their references, a strided input, opcheck, and inside
    torch.compile(fullgraph=True) and a CUDA graph."""

    @classmethod
    def setUpClass(cls):
        assert jitk.ops_error is None, jitk.ops_error
        cls.g = torch.Generator(device="cuda").manual_seed(1)
        major, _ = torch.cuda.get_device_capability()
        if major < 9:
            raise unittest.SkipTest("TMA needs sm_90")

    def test_tma_copy_and_transpose(self):
        for rows, cols, ld in ((128, 64, 64), (1000, 3000, 3008), (336, 136, 200), (8, 8, 8)):
            base = torch.randn(rows, ld, device="cuda", generator=self.g).to(torch.bfloat16)
            x = base[:, :cols]
            y = torch.ops.jitk.tma_copy(x)
            yt = torch.ops.jitk.tma_transpose(x)
            self.assertTrue(same(y, x.contiguous()), (rows, cols, ld))
            self.assertTrue(same(yt, x.t().contiguous()), (rows, cols, ld))
        # one row, any stride (26 bytes: row 8 of a 13-column matrix, 16-byte aligned)
        row = torch.randn(10, 13, device="cuda", generator=self.g).to(torch.bfloat16)[8:9, :8]
        self.assertTrue(same(torch.ops.jitk.tma_copy(row), row.contiguous()))
        # a transpose whose output rows are no 16-byte multiple: refused, saying why
        with self.assertRaisesRegex(Exception, "a positive multiple of 16"):
            torch.ops.jitk.tma_transpose(torch.zeros(333, 136, device="cuda", dtype=torch.bfloat16))
        torch.library.opcheck(torch.ops.jitk.tma_copy.default, (x,))
        torch.library.opcheck(torch.ops.jitk.tma_transpose.default, (x,))

    def test_cub_quantizer_same_bytes(self):
        x = (torch.randn(777, 3072, device="cuda", generator=self.g) * 3).to(torch.bfloat16)
        q, s = torch.ops.jitk.per_token_quant_fp8_cub(x)
        q0, s0 = torch.ops.jitk.per_token_quant_fp8(x)
        self.assertTrue(same(q, q0) and same(s, s0))
        torch.library.opcheck(torch.ops.jitk.per_token_quant_fp8_cub.default, (x,))

    def test_compiled_and_graphed(self):
        x = torch.randn(512, 3072, device="cuda", generator=self.g).to(torch.bfloat16)

        def f(x):
            q, s = torch.ops.jitk.per_token_quant_fp8_cub(torch.ops.jitk.tma_copy(x))
            return torch.ops.jitk.tma_transpose(x), q, s

        want = f(x)
        got = torch.compile(f, fullgraph=True)(x)
        self.assertTrue(all(same(a, b) for a, b in zip(want, got)))
        static = x.clone()
        f(static)  # warm: every kernel resolved before the capture
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = f(static)
        static.copy_(x * 2)
        g.replay()
        torch.cuda.synchronize()
        again = f(x * 2)
        self.assertTrue(all(same(a, b) for a, b in zip(out, again)))

if __name__ == "__main__":
    unittest.main(verbosity=2)
