"""CPU tests of the package's own parts (no GPU, no PyTorch needed): the
shape expression evaluator, the op schemas, the extension's tables and the
front end generated from the describe JSON, DLPack capsule parsing with
capsules made here, and `python -m jitk`. Run by tests/python.sh (source tree) and
tests/pip_install.sh (installed, JITK_TEST_INSTALLED=1)."""
import ctypes
import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.environ.get("JITK_TEST_ROOT", os.getcwd())
INSTALLED = bool(os.environ.get("JITK_TEST_INSTALLED"))
if not INSTALLED:
    sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
import jitk  # noqa: E402
from jitk import _core, _dlpack, _frontend, _ops, _schema, _shapes  # noqa: E402

SPECS = os.path.join(ROOT, "specs")
FAMILIES = os.path.join(ROOT, "tests", "families", "specs")


def describe(specs, selector=None):
    with jitk.Compiler(specs=specs, cache_dir="") as c:
        return c.describe(selector)


class ShapeTests(unittest.TestCase):
    def test_values(self):
        cases = [("rows", {"rows": 5}, 5), ("cdiv(n, 4)", {"n": 9}, 3), ("-7 / 2", {}, -3),
                 ("-7 % 2", {}, -1), ("7 % -2", {}, 1), ("min(a, b) * 2 + 1", {"a": 3, "b": 4}, 7),
                 ("max(a, b)", {"a": 3, "b": 4}, 4), ("a == 3 && !b", {"a": 3, "b": 0}, 1),
                 ("a < 3 || b >= 1", {"a": 3, "b": 0}, 0), ("cdiv(-7, 2)", {}, -3),
                 ("cdiv(7, -2)", {}, -3), ("cdiv(-7, -2)", {}, 4), ("N * (Hq + 2 * Hk)",
                                                                    {"N": 3, "Hq": 24, "Hk": 8}, 120),
                 ("1 - -1", {}, 2), (3072, {}, 3072)]
        for text, env, want in cases:
            self.assertEqual(_shapes.evaluate(_shapes.parse(text), env), want, text)

    def test_errors(self):
        for text, msg in [("a +", "expected a number"), ("f(1, 2)", "unknown function 'f'"),
                          ("(a", "expected ')'"), ("a b", "unexpected text"), ("a $ b", "unexpected character")]:
            with self.assertRaises(_shapes.ExprError) as e:
                _shapes.parse(text)
            self.assertIn(msg, str(e.exception))
        with self.assertRaises(_shapes.ExprError) as e:
            _shapes.evaluate(_shapes.parse("n / 0"), {"n": 1})
        self.assertIn("division by zero", str(e.exception))
        with self.assertRaises(_shapes.ExprError) as e:
            _shapes.evaluate(_shapes.parse("n + m"), {"n": 1})
        self.assertIn("unknown name 'm'", str(e.exception))
        self.assertEqual(_shapes.names(_shapes.parse("cdiv(n, m) + n * k")), ["n", "m", "k"])


def opspecs(specs):
    return {s["name"]: _ops.OpSpec(s) for s in describe(specs)["symbols"]}


class OpSpecTests(unittest.TestCase):
    """The schemas are the spec's argument table (io, optional, defaults);
    scalars that shapes bind are not arguments."""

    def test_norm_schemas(self):
        o = opspecs(SPECS)
        eps = "float eps=9.99999997e-07"
        self.assertEqual(o["fused_norm_scale_shift_fp8"].schema(),
                         f"(Tensor x, Tensor scale, Tensor shift, Tensor input_scale, {eps}) -> "
                         "(Tensor, Tensor)")
        self.assertEqual(o["fused_norm_scale_shift_fp8"].out_schema(),
                         f"(Tensor x, Tensor scale, Tensor shift, Tensor input_scale, {eps}, *, "
                         "Tensor(a!) y, Tensor(b!) q) -> ()")
        self.assertEqual(o["fused_scale_residual_norm_scale_shift"].schema(),
                         f"(Tensor x, Tensor residual, Tensor gate, Tensor scale, Tensor shift, "
                         f"{eps}) -> (Tensor, Tensor)")
        self.assertEqual(o["static_quant_fp8"].schema(), "(Tensor x, Tensor input_scale) -> Tensor")
        self.assertEqual(o["fused_norm_scale_shift_fp8"].mutated, ["y", "q"])
        self.assertEqual(o["fused_norm_scale_shift_fp8"].fallback,
                         ["fused_norm_scale_shift", "static_quant_fp8"])
        self.assertIsNone(o["static_quant_fp8"].no_functional)
        # q's shape: x's dimension (a DIM leaf: argument x, dimension 0)
        ix = o["static_quant_fp8"]._index["x"]
        self.assertEqual(o["static_quant_fp8"].programs["q"], ([[1, ix, 0]], None))
        n = o["fused_norm_scale_shift_fp8"]
        ix = n._index["x"]
        self.assertEqual(n.programs["q"], ([[1, ix, 0], [1, ix, 1]], None))
        self.assertFalse(n.select)  # hidden is x's dimension: no instance to select

    def test_data_only_family(self):
        # a family added as YAML only: ops with no Python change; an inout
        # argument is mutated by .out and copied by the functional variant
        o = opspecs(FAMILIES)
        self.assertEqual(o["tadd3"].schema(), "(Tensor x, Tensor y, Tensor z) -> Tensor")
        self.assertEqual(o["tadd3"].out_schema(),
                         "(Tensor x, Tensor y, Tensor z, *, Tensor(a!) out) -> ()")
        self.assertEqual(o["tadd_acc"].schema(), "(Tensor acc, Tensor z, int sx=0) -> Tensor")
        self.assertEqual(o["tadd_acc"].out_schema(), "(Tensor(a!) acc, Tensor z, int sx=0) -> ()")
        self.assertEqual(o["tadd_acc"].mutated, ["acc"])
        t = o["tadd_acc"].table()
        # acc: an inout, first on both stacks; the functional variant
        # returns its copy
        self.assertEqual(t["args"][0], ("acc", "t", "x", False, False, 0, 0, "i32"))
        self.assertEqual((t["nf"], t["no"], t["outputs"], t["returns"]), (3, 3, [], [0]))

    def test_the_extension_table(self):
        # where each C argument sits on the two variants' stacks, and the
        # programs that give the outputs' shapes (the C++ kernels read them)
        spec = opspecs(SPECS)["fused_norm_scale_shift_fp8"]
        t = spec.table()
        self.assertEqual(t["schema"], "fused_norm_scale_shift_fp8" + spec.schema())
        self.assertEqual(t["out_schema"], "fused_norm_scale_shift_fp8.out" + spec.out_schema())
        args = {a[0]: a for a in t["args"]}
        self.assertEqual([a[0] for a in t["args"]], [a["name"] for a in spec.call_args])
        self.assertEqual(args["x"][5:], (0, 0, "bf16"))
        self.assertEqual(args["eps"][1:], ("f", "i", False, False, 4, 4, ""))
        self.assertEqual(args["y"][5:7], (-1, 5))  # allocated; the first keyword of .out
        self.assertEqual(args["q"][5:7], (-1, 6))
        self.assertTrue(args["input_scale"][4])    # configured: watched
        self.assertEqual((t["nf"], t["no"]), (5, 7))
        self.assertEqual([t["args"][r][0] for r in t["returns"]], ["y", "q"])
        dims = {spec._index["x"]: (7, 3072)}
        shapes = [[_schema.run_program(p, dims=dims) for p in shape] for _, shape, _ in t["outputs"]]
        self.assertEqual(shapes, [[7, 3072], [7, 3072]])

    def test_programs_compute_the_expressions(self):
        # every operator of the spec's expressions, against _shapes' own
        # evaluation (the C++ evaluator follows the same opcodes)
        cases = ["rows", "cdiv(n, 4)", "-7 / 2", "-7 % 2", "min(a, b) * 2 + 1", "max(a, b)",
                 "a == 3 && !b", "a < 3 || b >= 1", "cdiv(-7, 2)", "n * (a + 2 * b)", "1 - -1",
                 "a != b", "a <= b", "a > b", "n - a"]
        env = {"rows": 5, "n": 9, "a": 3, "b": 4}
        leaf = {"rows": [1, 0, 0], "n": [1, 0, 1], "a": [3, 1], "b": [4, 0]}
        for text in cases:
            p = _schema._compile(_shapes.parse(text), lambda n: list(leaf[n]))
            got = _schema.run_program(p, dims=[[5, 9]], scalars={1: 3}, params=[4])
            self.assertEqual(got, _shapes.evaluate(_shapes.parse(text), env), text)

    def test_no_functional_variant_when_shapes_are_unknown(self):
        sym = {"name": "s", "instances": [{"name": "s"}], "params": [], "fallback": [],
               "args": [{"name": "y", "kind": "tensor", "dtype": "bf16", "io": "out",
                         "shape": ["m", "k * 2"], "strides": None, "present": [True]},
                        {"name": "x", "kind": "tensor", "dtype": "bf16", "io": "in",
                         "shape": ["m"], "strides": None, "present": [True]},
                        {"name": "m", "kind": "i64", "present": [True]}]}
        spec = _ops.OpSpec(sym)
        self.assertIn("needs 'k'", spec.no_functional)
        self.assertEqual(spec.out_schema(), "(Tensor x, *, Tensor(a!) y) -> ()")
        sym["args"][0]["shape"] = ["m", "2 * m"]
        sym["args"][0]["strides"] = ["sy", "1"]
        spec = _ops.OpSpec(sym)
        self.assertIsNone(spec.no_functional)
        ix = spec._index["x"]
        shape, strides = spec.programs["y"]
        self.assertEqual(shape, [[1, ix, 0], [0, 2, 1, ix, 0, 12]])  # m, 2 * m
        self.assertEqual(strides, [[], [0, 1]])  # sy: contiguous; 1

    def test_torch_extension_only_with_its_torch(self):
        # jitk._torch is used only with the PyTorch it was built for
        import types
        other = types.SimpleNamespace(__version__="0.0.0+other")
        mod, why = _ops.torch_module(other)
        self.assertIsNone(mod)
        stamp = os.path.join(os.path.dirname(_ops.__file__), "_torch.version")
        if os.path.exists(stamp):
            with open(stamp) as f:
                self.assertIn(f"built for torch {f.read().strip()}, this is torch 0.0.0+other",
                              why)
        else:
            self.assertIn("jitk._torch (the ops' C++ extension) is not built", why)
        self.assertIn("backend.py torch-ext", why)


class FrontendTests(unittest.TestCase):
    """The front end written at wheel build: a module per family whose
    functions have the schemas' signatures and call the ops, a .pyi, and
    SCHEMAS recording what each function was written for."""

    def test_every_family_generates_a_module_and_a_stub(self):
        import ast
        import inspect
        import types
        d = describe(SPECS)
        with tempfile.TemporaryDirectory() as out:
            families = _frontend.write(d, out)
            self.assertIn("norm_scale_shift", families)
            self.assertEqual(sorted(os.listdir(out)),
                             sorted(f + e for f in families for e in (".py", ".pyi")))
            for f in families:
                with open(os.path.join(out, f + ".pyi")) as fh:
                    ast.parse(fh.read())
            calls = []

            class Overload:
                def __init__(self, name):
                    self.name = name

                def __call__(self, *args, **kw):
                    calls.append((self.name, args, kw))
            ns = types.SimpleNamespace(ops=types.SimpleNamespace(jitk=types.SimpleNamespace(
                fused_norm_scale_shift_fp8=types.SimpleNamespace(
                    default=Overload("default"), out=Overload("out")))))
            with open(os.path.join(out, "norm_scale_shift.py")) as fh:
                src = fh.read()
            env = {}
            saved = sys.modules.get("torch")
            sys.modules["torch"] = ns  # what the module imports, stood in
            try:
                exec(compile(src, "norm_scale_shift.py", "exec"), env)  # noqa: S102
            finally:
                if saved is None:
                    del sys.modules["torch"]
                else:
                    sys.modules["torch"] = saved
        spec = opspecs(SPECS)["fused_norm_scale_shift_fp8"]
        self.assertEqual(env["SCHEMAS"]["fused_norm_scale_shift_fp8"],
                         (spec.schema(), spec.out_schema()))
        f = env["fused_norm_scale_shift_fp8"]
        self.assertEqual(str(inspect.signature(f)),
                         "(x, scale, shift, input_scale, eps=9.99999997e-07)")
        f(1, 2, 3, 4)
        env["out"].fused_norm_scale_shift_fp8(1, 2, 3, 4, y=5, q=6)
        self.assertEqual(calls, [("default", (1, 2, 3, 4, 9.99999997e-07), {}),
                                 ("out", (1, 2, 3, 4, 9.99999997e-07), {"y": 5, "q": 6})])
        self.assertIn("x: bf16 [rows, hidden]", f.__doc__)
        self.assertIn("input_scale: f32 [1], configured", f.__doc__)

    def test_stale_files_go(self):
        with tempfile.TemporaryDirectory() as out:
            for n in ("gone.py", "gone.pyi", "__init__.py", "out.py"):
                open(os.path.join(out, n), "w").close()
            _frontend.write(describe(SPECS, "static_quant_fp8"), out)
            self.assertEqual(sorted(os.listdir(out)), ["__init__.py", "out.py",
                                                       "static_quant_fp8.py",
                                                       "static_quant_fp8.pyi"])


def capsule(obj, name):
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    return new(ctypes.addressof(obj), name, None)


class DLPackTests(unittest.TestCase):
    def tensor(self):
        self.shape = (ctypes.c_int64 * 2)(4, 8)
        t = _dlpack.DLTensor()
        t.data = 0x7000
        t.device.device_type, t.device.device_id = 2, 0
        t.ndim = 2
        t.dtype.code, t.dtype.bits, t.dtype.lanes = 4, 16, 1
        t.shape = self.shape
        return t

    def test_legacy_and_versioned(self):
        m = _dlpack.DLManagedTensor()
        m.dl_tensor = self.tensor()
        cap = capsule(m, b"dltensor")
        addr, ro = _dlpack.view(cap, "x")
        self.assertEqual((addr, ro), (ctypes.addressof(m), False))
        self.assertEqual(_dlpack.DLTensor.from_address(addr).shape[1], 8)
        v = _dlpack.DLManagedTensorVersioned()
        v.version.major, v.version.minor = 1, 1
        v.flags = _dlpack.READ_ONLY
        v.dl_tensor = self.tensor()
        addr, ro = _dlpack.view(capsule(v, b"dltensor_versioned"), "x")
        self.assertEqual(addr, ctypes.addressof(v) + 32)
        self.assertTrue(ro)
        self.assertEqual(_dlpack.DLTensor.from_address(addr).data, 0x7000)

    def test_refused(self):
        v = _dlpack.DLManagedTensorVersioned()
        v.version.major = 2
        with self.assertRaises(ValueError) as e:
            _dlpack.view(capsule(v, b"dltensor_versioned"), "x")
        self.assertIn("x: DLPack 2.0 is not a version jitk reads", str(e.exception))
        m = _dlpack.DLManagedTensor()
        with self.assertRaises(ValueError) as e:
            _dlpack.view(capsule(m, b"used_dltensor"), "y")
        self.assertIn("y: __dlpack__ did not return an unused DLPack capsule", str(e.exception))

    def test_export_protocol(self):
        seen = []

        class New:
            def __dlpack__(self, stream=None, max_version=None):
                seen.append(("new", stream, max_version))
                return "cap"

        class Old:
            def __dlpack__(self, stream=None):
                seen.append(("old", stream))
                return "cap"
        self.assertEqual(_dlpack.export(New(), 1234, "x"), "cap")
        self.assertEqual(_dlpack.export(Old(), None, "x"), "cap")
        self.assertEqual(seen, [("new", 1234, (1, 0)), ("old", 1)])
        self.assertIsNone(_dlpack.framework_stream(New(), 0))


class Producer:
    """A DLPack producer: __dlpack_device__ says where it is (None: no such
    method); __dlpack__ raises what it is given, else returns a capsule of
    an f32 [1] CUDA tensor at data."""

    def __init__(self, where=(2, 0), raises=None, data=0x7000):
        self.where, self.raises = where, raises
        self.shape = (ctypes.c_int64 * 1)(1)
        self.m = _dlpack.DLManagedTensor()
        t = self.m.dl_tensor
        t.data = data
        t.device.device_type, t.device.device_id = where or (2, 0)
        t.ndim = 1
        t.dtype.code, t.dtype.bits, t.dtype.lanes = 2, 32, 1
        t.shape = self.shape
        if where is None:
            self.__dict__["no_device"] = True

    def __getattr__(self, name):  # __dlpack_device__ only where there is one
        if name == "__dlpack_device__" and "no_device" not in self.__dict__:
            return lambda: self.where
        raise AttributeError(name)

    def __dlpack__(self, stream=None, max_version=None):
        if self.raises is not None:
            raise self.raises
        return capsule(self.m, b"dltensor")


def stand_in_runtime(selector="static_quant_fp8"):
    """A Runtime without the library's runtime (that needs a GPU): the op's
    argument table from the specs, the handle a dummy."""
    rt = jitk.Runtime.__new__(jitk.Runtime)
    rt._h, rt.device = None, 0
    args = describe(SPECS, selector)["symbols"][0]["args"]
    rt._ops = {selector: ctypes.c_void_p(0x1234)}
    rt._kinds = {selector: {a["name"]: a["kind"] for a in args}}
    rt._args = {0x1234: args}
    rt._configured_args = {selector: {a["name"] for a in args if a.get("configured")}}
    rt._configured, rt._configured_keep = {}, {}
    return rt


class ProducerErrorTests(unittest.TestCase):
    """issue 22 #12: whatever a DLPack producer raises, or a tensor that
    says it is not on the runtime's GPU, is a jitk.ArgumentError naming the
    argument, before anything reaches the library."""

    def setUp(self):
        self.saved = _core._op_call_dlpack
        _core._op_call_dlpack = lambda *a: self.fail("the call reached the library")

    def tearDown(self):
        _core._op_call_dlpack = self.saved

    def call(self, **tensors):
        rt = stand_in_runtime()
        with self.assertRaises(jitk.ArgumentError) as e:
            rt.call("static_quant_fp8", "strict", **tensors)
        self.assertEqual(e.exception.status, "EINVAL")
        return e.exception.message

    def test_where_the_producer_says_it_is(self):
        ok = Producer()
        self.assertEqual(self.call(q=ok, x=Producer((1, 0)), input_scale=ok),
                         "x is on the CPU, not cuda:0")
        self.assertEqual(self.call(q=ok, x=ok, input_scale=Producer((2, 3))),
                         "input_scale is on cuda:3, not cuda:0")
        self.assertEqual(self.call(q=Producer((3, 0)), x=ok, input_scale=ok),
                         "q is on CUDA pinned host memory, not cuda:0")
        self.assertEqual(self.call(q=ok, x=Producer((99, 0)), input_scale=ok),
                         "x is on DLPack device type 99, not cuda:0")
        bad = Producer()
        bad.where = ("cuda", 0)
        self.assertIn("x: __dlpack_device__() failed: TypeError", self.call(q=ok, x=bad,
                                                                            input_scale=ok))

    def test_every_producer_failure_is_wrapped(self):
        ok = Producer()
        for exc, text in [(RuntimeError("NumPy only supports stream=None."),
                           "x: __dlpack__(stream=1) failed: RuntimeError: NumPy only supports "
                           "stream=None."),
                          (BufferError("read-only"), "x: __dlpack__(stream=1) failed: "
                           "BufferError: read-only"),
                          (TypeError("no"), "x: __dlpack__(stream=1) failed: TypeError: no"),
                          (ValueError("v"), "x: __dlpack__(stream=1) failed: ValueError: v")]:
            self.assertEqual(self.call(q=ok, x=Producer(None, exc), input_scale=ok), text)
        rt = stand_in_runtime()
        with self.assertRaises(jitk.ArgumentError) as e:
            rt.configure("fused_norm_scale_shift_fp8", "input_scale",
                         Producer(None, RuntimeError("boom")))
        self.assertEqual(e.exception.message,
                         "input_scale: __dlpack__(stream=1) failed: RuntimeError: boom")
        with self.assertRaises(jitk.ArgumentError) as e:
            rt.configure("fused_norm_scale_shift_fp8", "input_scale", Producer((1, 0)))
        self.assertEqual(e.exception.message, "input_scale is on the CPU, not cuda:0")

    @unittest.skipUnless(importlib.util.find_spec("numpy"), "needs NumPy")
    def test_numpy_array(self):
        import numpy as np
        a = np.zeros(4, np.float32)
        self.assertEqual(self.call(q=Producer(), x=a, input_scale=Producer()),
                         "x is on the CPU, not cuda:0")
        with self.assertRaises(jitk.ArgumentError) as e:
            jitk.configure("fused_norm_scale_shift_fp8", "input_scale", a[:1])
        self.assertEqual(e.exception.message, "input_scale is on the CPU, not a CUDA device")


class ConfiguredTests(unittest.TestCase):
    """issue 22 #16: a configured tensor's validation is tied to the tensor,
    not only to its address: the runtime holds it (its memory cannot be
    handed to another tensor, as PyTorch's caching allocator does inside
    one driver allocation) until unconfigure, and a write into it since
    configure (its _version) undoes the validation before the next call.
    The library's side is stood in for (it needs a GPU); tests/python/
    test_torch.py does this on the GPU under the caching allocator."""

    def setUp(self):
        self.calls = []
        self.saved = (_core._configure, _core._unconfigure)
        _core._configure = lambda h, sym, arg, t: self.calls.append(
            ("configure", sym, arg, t._obj.data)) or 0
        _core._unconfigure = lambda h, data: self.calls.append(("unconfigure", data)) or 0

    def tearDown(self):
        _core._configure, _core._unconfigure = self.saved

    def test_the_runtime_holds_a_configured_tensor_until_unconfigure(self):
        import weakref
        rt = stand_in_runtime()
        s = Producer(data=0x7100)
        alive = weakref.ref(s)
        rt.configure("fused_norm_scale_shift_fp8", "input_scale", s)
        self.assertEqual(self.calls, [("configure", b"fused_norm_scale_shift_fp8", b"input_scale",
                                       0x7100)])
        del s
        self.assertIsNotNone(alive())  # its memory stays its own
        self.assertEqual(rt._configured, {0x7100: None})
        rt.unconfigure(alive())
        self.assertIsNone(alive())     # released
        self.assertEqual(self.calls[-1], ("unconfigure", 0x7100))
        self.assertEqual(rt._configured, {})
        s = Producer(data=0x7200)
        alive = weakref.ref(s)
        rt.configure("fused_norm_scale_shift_fp8", "input_scale", s)
        del s
        rt.close()
        self.assertIsNone(alive())     # and at close


class CommandTests(unittest.TestCase):
    """python -m jitk, run from a directory outside the source tree."""

    def run_jitk(self, *args):
        env = dict(os.environ)
        if not INSTALLED:
            env["PYTHONPATH"] = os.path.join(ROOT, "bindings", "python")
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([sys.executable, "-m", "jitk", *args], cwd=d, env=env,
                               capture_output=True, text=True)
        return r.returncode, r.stdout, r.stderr

    def test_list_explain_precompile(self):
        rc, out, _ = self.run_jitk("list", "static_quant_fp8", "--specs", SPECS)
        self.assertEqual(rc, 0)
        self.assertRegex(out, r"\nstatic_quant_fp8 +static_quant_fp8 +- +sm_89\+\n")
        rc, out, _ = self.run_jitk("explain", "static_quant_fp8", "--arch", "sm_80", "--specs", SPECS)
        self.assertEqual(rc, 1)
        self.assertTrue(out.startswith("static_quant_fp8 on sm_80: unavailable"))
        with tempfile.TemporaryDirectory() as cache:
            rc, out, _ = self.run_jitk("precompile", "static_quant_fp8", "--arch", "sm_90,sm_80",
                                       "--cache", cache, "--specs", SPECS)
            self.assertEqual(rc, 0, out)
            self.assertIn("[1/2] compiled static_quant_fp8 sm_90\n[2/2] gated    static_quant_fp8 sm_80",
                          out)
            self.assertIn(f"into {cache} in", out)
            # the CLI's summary line: compiled, cached, remote, failed, gated
            self.assertTrue(out.rstrip().endswith(
                "1 compiled, 0 cached, 0 remote, 0 failed, 1 gated"), out)
            rc, out, _ = self.run_jitk("precompile", "static_quant_fp8", "--arch", "sm_90",
                                       "--cache", cache, "--specs", SPECS)
            self.assertTrue(out.rstrip().endswith(
                "0 compiled, 1 cached, 0 remote, 0 failed, 0 gated"), out)
        rc, _, err = self.run_jitk("explain", "nosuch", "--arch", "sm_90", "--specs", SPECS)
        self.assertEqual((rc, err.strip()), (1, "jitk: no symbol named 'nosuch' (see jitk list)"))
        rc, _, err = self.run_jitk("precompile", "--arch", "hopper", "--specs", SPECS)
        self.assertEqual(rc, 1)
        self.assertIn("'hopper' is not an architecture", err)
        self.assertEqual(self.run_jitk("bogus")[0], 2)
        self.assertEqual(self.run_jitk()[0], 2)

    def test_help_says_all_of_it(self):
        # the description was the docstring's first line, cut mid-sentence
        rc, out, _ = self.run_jitk("--help")
        self.assertEqual(rc, 0)
        text = " ".join(out.split())
        self.assertIn("python -m jitk: the jitk command's list, explain and precompile, through "
                      "the library (the same specs, selectors, cache and messages). Exit status: "
                      "0 ok, 1 failure, 2 usage.", text)

    def test_precompile_counts_each_origin(self):
        # what the remote tier gave is counted as remote, as the CLI does
        # (the library's answers stood in for: a remote needs a server)
        import contextlib
        import io
        from jitk import __main__ as cli
        answers = iter(["remote", "compiled", "cache", "layer", "memory", "remote"])
        saved = _core.Compiler.precompile
        _core.Compiler.precompile = lambda self, inst, arch: next(answers)
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                rc = cli.main(["precompile", "static_quant_fp8", "--arch",
                               "sm_89,sm_90,sm_100,sm_120,sm_86,sm_80", "--specs", SPECS,
                               "--cache", ""])
        finally:
            _core.Compiler.precompile = saved
        lines = out.getvalue().splitlines()
        self.assertEqual(rc, 0)
        self.assertEqual(lines[0], "[1/6] remote   static_quant_fp8 sm_89")
        self.assertEqual(lines[4], "[5/6] compiled static_quant_fp8 sm_86 (in memory only: not "
                         "written to the cache)")
        self.assertTrue(lines[-1].endswith("2 compiled, 2 cached, 2 remote, 0 failed, 0 gated"),
                        lines[-1])

    @unittest.skipUnless(INSTALLED, "the installed package")
    def test_installed_package_is_self_contained(self):
        # the library, specs and templates come from the package; no
        # environment variable, no source tree
        pkg = os.path.dirname(jitk.__file__)
        self.assertFalse(pkg.startswith(os.path.realpath(ROOT) + os.sep))
        self.assertEqual(jitk.library_path, os.path.join(pkg, "lib", "libjitk.so.0"))
        for d in ("specs", "templates", "include"):
            self.assertTrue(os.path.isdir(os.path.join(pkg, d)), d)
        env = {k: v for k, v in os.environ.items() if not k.startswith("JITK_")}
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run([sys.executable, "-m", "jitk", "explain",
                                "fused_norm_scale_shift_fp8[hidden=3072]", "--arch", "sm_90"],
                               cwd=d, env=env, capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(r.stdout.startswith("fused_norm_scale_shift_fp8[hidden=3072] on sm_90: runs"))
            # the gate's location names the packaged spec file
            r = subprocess.run([sys.executable, "-m", "jitk", "explain", "static_quant_fp8",
                                "--arch", "sm_80"], cwd=d, env=env, capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn(os.path.join(pkg, "specs", "static_quant_fp8.yaml:"), r.stdout)


@unittest.skipIf(INSTALLED, "the build backend is the source tree's")
class ExtensionBuildTests(unittest.TestCase):
    """What backend.py checks after compiling jitk/_torch.cpp: a copy of
    libstdc++ linked into the extension (a compiler that links it
    statically) is seen, and PyTorch's shared libstdc++ is found through
    libc10's dependencies. On the GPU machines such a copy crashed the
    process at the first number an op's warning formatted (std::locale's
    facets of the two runtimes disagree)."""

    @classmethod
    def setUpClass(cls):
        import shutil
        for tool in ("c++", "nm", "ldd"):
            if not shutil.which(tool):
                raise unittest.SkipTest(f"no {tool}")
        spec = importlib.util.spec_from_file_location(
            "jitk_backend", os.path.join(ROOT, "bindings", "python", "_build", "backend.py"))
        cls.backend = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(cls.backend)
        cls.dir = tempfile.TemporaryDirectory()
        src = os.path.join(cls.dir.name, "x.cpp")
        with open(src, "w") as f:
            f.write('#include <sstream>\n#include <string>\n'
                    '__attribute__((visibility("default"))) std::string fmt(unsigned long v) '
                    '{ std::ostringstream s; s << std::hex << v; return s.str(); }\n')
        cls.shared = os.path.join(cls.dir.name, "libc10.so")  # stands in for PyTorch's
        cls.static = os.path.join(cls.dir.name, "static.so")
        for out, extra in ((cls.shared, []), (cls.static, ["-static-libstdc++"])):
            r = subprocess.run(["c++", "-shared", "-fPIC", "-fvisibility=hidden", src, "-o", out,
                                *extra], capture_output=True, text=True)
            if r.returncode:
                raise unittest.SkipTest(f"c++ {' '.join(extra)}: {r.stderr.strip()[:200]}")

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def test_a_static_libstdcxx_is_seen(self):
        self.assertTrue(self.backend.cxx_runtime_copied(self.static))
        self.assertFalse(self.backend.cxx_runtime_copied(self.shared))
        self.assertFalse(self.backend.cxx_runtime_copied(os.path.join(self.dir.name, "none.so")))

    def test_torchs_libstdcxx_is_found_through_libc10(self):
        found = self.backend.torch_libstdcxx([os.path.join(self.dir.name, "nothing"), self.dir.name])
        self.assertIsNotNone(found)
        self.assertRegex(os.path.basename(found), r"^libstdc\+\+\.so")
        self.assertTrue(os.path.exists(found))
        self.assertIsNone(self.backend.torch_libstdcxx([os.path.join(self.dir.name, "nothing")]))


if __name__ == "__main__":
    unittest.main(verbosity=2)
