"""CPU tests of the package's own parts (no GPU, no PyTorch needed): the
shape expression evaluator, the op schemas and kernels generated from the
describe JSON, DLPack capsule parsing with capsules made here, the
compiled call plan against a recording stand-in for jitk_op_call, and
`python -m jitk`. Run by tests/python.sh (source tree) and
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
from jitk import _core, _dlpack, _ops, _shapes  # noqa: E402

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
        self.assertEqual(o["static_quant_fp8"].allocs, [("q", ["_sh_x[0]"], None, "fp8_e4m3")])
        self.assertEqual(o["fused_norm_scale_shift_fp8"].allocs[1],
                         ("q", ["_sh_x[0]", "_sh_x[1]"], None, "fp8_e4m3"))

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
        src = o["tadd_acc"].source()
        self.assertIn("acc = acc.clone()", src)
        compile(src, "<test>", "exec")

    def test_generated_kernels_run_with_stand_ins(self):
        # the functional kernel's allocation and call order, with stand-ins
        # for torch.empty, the plan and the stream
        spec = opspecs(SPECS)["fused_norm_scale_shift_fp8"]
        calls = []

        class Dev:
            index = 3
            type = "cuda"

        class T:
            def __init__(self, shape):
                self.shape, self.device = shape, Dev()

        def empty(shape, dtype, device):
            calls.append(("empty", shape, dtype, device.index))
            return T(shape)

        def plan(stream, *values):
            calls.append(("call", stream, len(values), values[-1]))
            return 0
        env = dict(_shapes.HELPERS, _empty=empty, _empty_strided=None, _plans={3: plan},
                   _plan=None, _stream=lambda d: 1000 + d, _fail=None, _touch=lambda d: None,
                   _compiling=lambda: False, _plain=())
        for k in _ops.TORCH_DTYPES:
            env["_dt_" + k] = k
        exec(compile(spec.source(), "<test>", "exec"), env)
        x = T((7, 3072))
        y, q = env["_fn"](x, T((3072,)), T((3072,)), T((1,)))
        self.assertEqual(calls, [("empty", (7, 3072), "bf16", 3), ("empty", (7, 3072), "fp8_e4m3", 3),
                                 ("call", 1003, 7, 9.99999997e-07)])
        self.assertEqual((y.shape, q.shape), ((7, 3072), (7, 3072)))

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
        self.assertEqual(spec.allocs, [("y", ["_sh_x[0]", "(2 * _sh_x[0])"],
                                        ["((2 * _sh_x[0]))", "1"], "bf16")])
        self.assertEqual(spec.shape_lines, ["    _sh_x = x.shape"])

    def test_torch_plan_only_with_its_torch(self):
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
            self.assertIn("jitk._torch is not built", why)
        os.environ["JITK_TORCH_PLAN"] = "0"
        try:
            self.assertEqual(_ops.torch_module(other), (None, "JITK_TORCH_PLAN=0"))
        finally:
            del os.environ["JITK_TORCH_PLAN"]

    def test_torch_plan_kernels_with_stand_ins(self):
        # the eager variants through jitk._torch's plan: each output's slot
        # holds its shape (each input's shape read once), the plan's
        # outputs are returned; NOT_PLAIN (an int) or compiling takes the
        # dispatcher's op
        spec = opspecs(SPECS)["fused_norm_scale_shift_fp8"]
        calls, reads = [], []

        class T:
            def __init__(self, shape):
                self._shape = shape

            @property
            def shape(self):
                reads.append(self._shape)
                return self._shape
        answer = []

        def tp(*values):
            calls.append(values)
            return answer[0]
        compiling = [False]
        env = dict(_shapes.HELPERS, _tp=tp, _tpo=tp, _compiling=lambda: compiling[0],
                   _op=lambda **kw: ("op", sorted(kw)), _op_out=lambda **kw: ("op_out", sorted(kw)))
        src = spec.source(torch_plan=True)
        exec(compile(src, "<test>", "exec"), env)
        x, sc, sh, s = T((7, 3072)), T((3072,)), T((3072,)), T((1,))
        answer[:] = [("Y", "Q")]
        self.assertEqual(env["_eager"](x, sc, sh, s), ("Y", "Q"))
        names = [a["name"] for a in spec.call_args]
        got = dict(zip(names, calls[-1]))
        ix = names.index("x")  # shaped like x: its index (its shape read by the plan)
        self.assertEqual((got["y"], got["q"], got["x"], got["eps"]),
                         (ix, ix, x, 9.99999997e-07))
        self.assertEqual(reads, [])
        # an output shaped otherwise: its shape, each input's shape read once
        qk = opspecs(SPECS)["qk_norm_rope_out"]
        env2 = dict(env)
        exec(compile(qk.source(torch_plan=True), "<test>", "exec"), env2)
        q, k = T((2, 24, 128)), T((2, 20, 128))
        env2["_eager"](q, k, k, T((128,)), T((128,)), T((64, 128)))
        got = dict(zip([a["name"] for a in qk.call_args], calls[-1]))
        self.assertEqual(got["k_out"], ((2, 20, 128), (20 * 128, 128, 1)))
        self.assertEqual(reads, [(2, 24, 128), (2, 20, 128)])
        answer[:] = [_ops.NOT_PLAIN]
        self.assertEqual(env["_eager"](x, sc, sh, s)[0], "op")
        self.assertEqual(env["_eager_out"](x, sc, sh, s, y=1, q=2)[0], "op_out")
        answer[:] = [None]
        self.assertIsNone(env["_eager_out"](x, sc, sh, s, y=1, q=2))
        self.assertEqual(dict(zip(names, calls[-1]))["q"], 2)
        n = len(calls)
        compiling[0] = True
        self.assertEqual(env["_eager"](x, sc, sh, s)[0], "op")
        self.assertEqual(env["_eager_out"](x, sc, sh, s, y=1, q=2)[0], "op_out")
        self.assertEqual(len(calls), n)  # never the plan while compiling
        # a family with an inout and no allocated output: the copy goes in
        # and comes back
        acc = opspecs(FAMILIES)["tadd_acc"].source(torch_plan=True)
        self.assertIn("acc = acc.clone()", acc)
        compile(acc, "<test>", "exec")


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


def fast():
    try:
        from jitk import _fast
        return _fast
    except ImportError:
        return None


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

    def watched(self, plan_of):
        """A plan watching argument x (index 1): a write since configure
        calls stale with its address before the call; an unwatched or
        unconfigured address is left to the library."""
        bf16 = FakeDtype()
        versions, seen = {0x2000: 5, 0x3000: None}, []

        def stale(p):
            seen.append(p)
            versions.pop(p)
        plan = plan_of(("y", "x", "w", "n", "eps"), "ttolf", ((bf16, 4, 16),),
                       ((1,), versions, stale))
        y = FakeTensor(0x1000, (4, 6), (6, 1), bf16)
        x = FakeTensor(0x2000, (4, 6), (6, 1), bf16)
        x._version = 5
        self.assertEqual(plan(55, y, x, None, 5, 0.5), 0)
        self.assertEqual(seen, [])
        x._version = 6  # written in place
        self.assertEqual(plan(55, y, x, None, 5, 0.5), 0)
        self.assertEqual(seen, [0x2000])
        versions[0x2000] = 6
        del x._version  # no version counter: not the tensor configured
        self.assertEqual(plan(55, y, x, None, 5, 0.5), 0)
        self.assertEqual(seen, [0x2000, 0x2000])
        # None: a tensor configure saw without a counter (an inference tensor)
        x3 = FakeTensor(0x3000, (4, 6), (6, 1), bf16)
        self.assertEqual(plan(55, y, x3, None, 5, 0.5), 0)
        self.assertEqual(seen, [0x2000, 0x2000])
        return plan

    @unittest.skipIf(fast() is None, "jitk._fast is not built (the installed package has it)")
    def test_the_c_plan_undoes_a_validation_written_since(self):
        def cb(info, op, mode, args, n, stream):
            return 0
        fn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_core._CallInfo), ctypes.c_void_p,
                              ctypes.c_int, ctypes.POINTER(_core._Arg), ctypes.c_size_t,
                              ctypes.c_void_p)(cb)

        def plan_of(names, kinds, dtypes, watch):
            return fast().Plan(0x1234, ctypes.cast(fn, ctypes.c_void_p).value, 2, 0, names,
                               kinds, dtypes, (FakeTensor, FakeParameter), jitk.ArgumentError,
                               jitk.ArgumentTypeError, False, watch)
        self.watched(plan_of)
        with self.assertRaises(ValueError):  # a scalar is no configured tensor
            plan_of(("x", "n"), "tl", (), ((1,), {}, print))
        with self.assertRaises(TypeError):
            plan_of(("x",), "t", (), ((0,), [], print))

    def test_the_ctypes_plan_undoes_a_validation_written_since(self):
        op_call = _core._op_call
        _core._op_call = lambda info, op, mode, arr, n, stream: 0
        try:
            self.watched(lambda names, kinds, dtypes, watch: _ops._PyPlan(
                0x1234, 2, 0, names, kinds, dtypes, (FakeTensor, FakeParameter), False, watch))
        finally:
            _core._op_call = op_call


class FakeTensor:
    """Quacks like a torch.Tensor for the plan (it reads get_device,
    dtype, data_ptr, shape and stride)."""

    def __init__(self, ptr, shape, strides, dtype, device=0):
        self.p, self.shape, self.s, self.dtype, self.d = ptr, shape, strides, dtype, device

    def get_device(self):
        return self.d

    def data_ptr(self):
        return self.p

    def stride(self):
        return self.s

    def dim(self):
        return len(self.shape)


class FakeDtype:
    pass


class FakeParameter(FakeTensor):
    """Like torch.Tensor's own attributes: shape and dtype are descriptors of
    the class (the plan looks them up once per class, then calls them with
    the tensor), the methods are the class's."""

    def __init__(self, ptr, shape, strides, dtype, device=0):
        self.p, self._shape, self.s, self._dtype, self.d = ptr, shape, strides, dtype, device

    shape = property(lambda self: self._shape)
    dtype = property(lambda self: self._dtype)


@unittest.skipIf(fast() is None, "jitk._fast is not built (the installed package has it)")
class PlanTests(unittest.TestCase):
    """The compiled plan, against a stand-in for jitk_op_call that records
    what it was given."""

    def setUp(self):
        self.seen = []
        fn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_core._CallInfo), ctypes.c_void_p,
                              ctypes.c_int, ctypes.POINTER(_core._Arg), ctypes.c_size_t,
                              ctypes.c_void_p)
        self.cb = fn(self.record)
        self.bf16, self.f32 = FakeDtype(), FakeDtype()
        self.plan = fast().Plan(0x1234, ctypes.cast(self.cb, ctypes.c_void_p).value, 2, 0,
                                ("y", "x", "w", "n", "eps"), "ttolf",
                                ((self.bf16, 4, 16), (self.f32, 2, 32)), (FakeTensor, FakeParameter),
                                jitk.ArgumentError, jitk.ArgumentTypeError)

    def record(self, info, op, mode, args, n, stream):
        rec = []
        for i in range(n):
            a = args[i]
            if a.type == 5:
                t = a.v.tensor.contents
                rec.append((a.name.decode(), t.data, t.dtype.code, t.dtype.bits,
                            list(t.shape[:t.ndim]), list(t.strides[:t.ndim])))
            else:
                rec.append((a.name.decode(), a.type, a.v.i64 if a.type == 3 else a.v.f32))
        self.seen.append((op, mode, stream, rec))
        info[0].fallback = 1 if stream == 7 else 0
        return -3 if stream == 9 else 0

    def test_reads_tensors_and_scalars(self):
        y = FakeTensor(0x1000, (4, 6), (6, 1), self.bf16)
        x = FakeTensor(0x2000, (4, 6), (8, 1), self.bf16)
        self.assertEqual(self.plan(55, y, x, None, 5, 0.5), 0)
        self.assertEqual(self.seen[-1], (0x1234, 2, 55, [
            ("y", 0x1000, 4, 16, [4, 6], [6, 1]), ("x", 0x2000, 4, 16, [4, 6], [8, 1]),
            ("n", 3, 5), ("eps", 4, 0.5)]))
        w = FakeTensor(0x3000, (3,), (1,), self.f32)
        self.assertEqual(self.plan(7, y, x, w, 5, 2), 2)  # ran through the fallback
        self.assertEqual(self.seen[-1][3][2], ("w", 0x3000, 2, 32, [3], [1]))
        self.assertEqual(self.plan(9, y, x, None, 5, 0.5), -3)  # the library's status
        self.assertEqual(self.plan(55, y, object(), None, 5, 0.5), -100)  # not a plain tensor
        # the second plain type, whose shape and dtype are the class's descriptors
        p = FakeParameter(0x4000, (4, 6), (6, 1), self.bf16)
        self.assertEqual(self.plan(55, p, x, None, 5, 0.5), 0)
        self.assertEqual(self.seen[-1][3][0], ("y", 0x4000, 4, 16, [4, 6], [6, 1]))
        with self.assertRaises(ValueError) as e:
            self.plan(55, FakeParameter(0x4000, (4, 6), (6, 1), self.bf16, device=2), x, None, 5, 0.5)
        self.assertIn("y is on cuda:2, not cuda:0", str(e.exception))

    def test_subclasses_in_a_kernels_plan(self):
        # an eager plan leaves a subclass to the dispatcher; a kernel's plan
        # (under the dispatcher) reads it with the base class's attributes
        class Sub(FakeTensor):
            def data_ptr(self):  # a subclass's override is not what is read
                return 0xBAD
        x = FakeTensor(0x2000, (4, 6), (8, 1), self.bf16)
        sub = Sub(0x5000, (4, 6), (6, 1), self.bf16)
        self.assertEqual(self.plan(55, sub, x, None, 5, 0.5), -100)
        kplan = fast().Plan(0x1234, ctypes.cast(self.cb, ctypes.c_void_p).value, 2, 0,
                            ("y", "x", "w", "n", "eps"), "ttolf",
                            ((self.bf16, 4, 16), (self.f32, 2, 32)), (FakeTensor, FakeParameter),
                            jitk.ArgumentError, jitk.ArgumentTypeError, True)
        self.assertEqual(kplan(55, sub, x, None, 5, 0.5), 0)
        self.assertEqual(self.seen[-1][3][0], ("y", 0x5000, 4, 16, [4, 6], [6, 1]))
        self.assertEqual(kplan(55, object(), x, None, 5, 0.5), -100)  # not a tensor at all
        # the ctypes plan the same way
        kinds = ((self.bf16, 4, 16),)
        d = _ops._PyPlan(0x1234, 2, 0, ("x",), "t", kinds, (FakeTensor, FakeParameter),
                         True)._tensor(sub, "x")
        self.assertEqual((d.ndim, list(d.shape[:2]), list(d.strides[:2])), (2, [4, 6], [6, 1]))
        self.assertRaises(_ops._NotPlain, _ops._PyPlan(0x1234, 2, 0, ("x",), "t", kinds,
                                                       (FakeTensor, FakeParameter))._tensor,
                          sub, "x")

    def test_refuses_before_the_call(self):
        y = FakeTensor(0x1000, (4, 6), (6, 1), self.bf16)
        x = FakeTensor(0x2000, (4, 6), (8, 1), self.bf16)
        cases = [
            ((y, FakeTensor(1, (4,), (1,), FakeDtype()), None, 5, 0.5), TypeError, "x: dtype"),
            ((y, FakeTensor(1, (4,), (1,), self.bf16, device=1), None, 5, 0.5), ValueError,
             "x is on cuda:1, not cuda:0"),
            ((y, FakeTensor(1, (4,), (1,), self.bf16, device=-1), None, 5, 0.5), ValueError,
             "x is on the CPU, not cuda:0"),
            ((y, FakeTensor(1, (1,) * 7, (1,) * 7, self.bf16), None, 5, 0.5), ValueError,
             "x has more than 6 dimensions"),
            ((y, x, None, True, 0.5), TypeError, "n must be an int, not bool"),
            ((y, x, None, 2 ** 63, 0.5), ValueError, "n is out of range for i64"),
            ((y, x, None, 1, 1e39), ValueError, "eps 1e+39 does not fit in a 32-bit float"),
            ((y, x, None, 1, "a"), TypeError, "eps must be a float, not str"),
            ((None, x, None, 1, 1.0), TypeError, "y must be a torch.Tensor, not None"),
        ]
        for args, kind, msg in cases:
            with self.assertRaises(kind) as e:
                self.plan(55, *args)
            self.assertIsInstance(e.exception, jitk.Error)
            self.assertIn(msg, str(e.exception))
        self.assertEqual(self.seen, [])
        with self.assertRaises(TypeError):
            self.plan(55, y, x)


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
        self.assertIsNotNone(fast())
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


if __name__ == "__main__":
    unittest.main(verbosity=2)
