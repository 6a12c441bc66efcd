"""CPU tests of the Python binding (no GPU, no PyTorch needed): run by
tests/python.sh in CI on the source tree, and by tests/pip_install.sh on
the installed package (JITK_TEST_INSTALLED=1: jitk comes from the venv)."""
import os
import shutil
import sys
import tempfile
import unittest

ROOT = os.environ.get("JITK_TEST_ROOT", os.getcwd())
if not os.environ.get("JITK_TEST_INSTALLED"):
    sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
import jitk  # noqa: E402

SPECS = os.path.join(ROOT, "specs")


class CompilerTests(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="jitk-py-")

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_symbols(self):
        with jitk.Compiler(specs=SPECS, cache_dir="") as c:
            names = c.symbols()
            insts = c.instances()
            d = c.describe()
        # the naming rule: symbols by name, instances by selector
        self.assertIn("fused_norm_scale_shift_fp8", names)
        self.assertIn("static_quant_fp8", names)
        self.assertNotIn("fused_norm_scale_shift_fp8", insts)
        self.assertIn("fused_norm_scale_shift_fp8[hidden=3072]", insts)
        self.assertIn("fused_norm_scale_shift_fp8[hidden=1536]", insts)
        self.assertIn("static_quant_fp8", insts)
        self.assertEqual(sorted(s["name"] for s in d["symbols"]), sorted(names))
        self.assertEqual(sum(len(s["instances"]) for s in d["symbols"]), len(insts))
        sym = next(s for s in d["symbols"] if s["name"] == "fused_norm_scale_shift_fp8")
        x = next(a for a in sym["args"] if a["name"] == "x")
        self.assertEqual((x["kind"], x["dtype"], x["io"], x["shape"]),
                         ("tensor", "bf16", "in", ["rows", "hidden"]))
        self.assertEqual(sym["fallback"][1]["symbol"], "static_quant_fp8")
        self.assertEqual(sym["fallback"][1]["map"]["x"], {"arg": "y", "flat": True})

    def test_selectors_are_read_to_their_end(self):
        # issue 22 #7: text after the first ']' was ignored here too
        c = jitk.Compiler(specs=SPECS, cache_dir="")
        for sel, col in (("copy_heads[head_dim=64][head_dim=128]", 24),
                         ("copy_heads[head_dim=64],head_dim=128]", 24),
                         ("copy_heads[head_dim=64,]", 24), ("copy_heads]]]", 11)):
            with self.assertRaises(jitk.Error) as e:
                c.explain(sel, "sm_90")
            self.assertEqual(e.exception.status, "EINVAL")
            self.assertIn("'%s': column %d: " % (sel, col), str(e.exception))
            self.assertIn("    1 | %s\n      | %s^" % (sel, " " * (col - 1)), e.exception.detail)
        runs, text = c.explain("copy_heads[head_dim=64]", "sm_90")
        self.assertTrue(runs)

    def test_explain(self):
        c = jitk.Compiler(specs=SPECS, cache_dir="")
        runs, text = c.explain("fused_norm_scale_shift_fp8[hidden=3072]", "sm_90")
        self.assertTrue(runs)
        self.assertTrue(text.startswith("fused_norm_scale_shift_fp8[hidden=3072] on sm_90: runs"))
        runs, text = c.explain("fused_norm_scale_shift_fp8", "sm_89")
        self.assertTrue(runs)
        self.assertIn("falls back", text)
        runs, text = c.explain("static_quant_fp8", "sm_80")
        self.assertFalse(runs)
        self.assertIn("needs sm_89 or newer", text)
        with self.assertRaises(jitk.Error) as e:
            c.explain("no_such", "sm_90")
        self.assertEqual(e.exception.status, "ENOENT")
        with self.assertRaises(jitk.Error) as e:
            c.explain("static_quant_fp8", "hopper")
        self.assertEqual(e.exception.status, "EINVAL")
        c.close()

    def test_precompile_then_cached(self):
        cache = os.path.join(self.tmp, "cache")
        with jitk.Compiler(specs=SPECS, cache_dir=cache) as c:
            self.assertEqual(c.precompile("static_quant_fp8", "sm_90"), "compiled")
            self.assertEqual(c.precompile("static_quant_fp8", "sm_90"), "cache")
        with jitk.Compiler(specs=SPECS, cache_dir="", cache_path=cache, no_compile=True) as c:
            self.assertEqual(c.precompile("static_quant_fp8", "sm_90"), "layer")
            with self.assertRaises(jitk.Error) as e:
                c.precompile("static_quant_fp8", "sm_100")
            self.assertEqual(e.exception.status, "ENOCOMPILE")

    def test_spec_error(self):
        bad = os.path.join(self.tmp, "specs")
        os.makedirs(bad)
        with open(os.path.join(bad, "x.yaml"), "w") as f:
            f.write("family: x\nfamily: y\n")
        with self.assertRaises(jitk.Error) as e:
            jitk.Compiler(specs=bad, cache_dir="")
        self.assertEqual(e.exception.status, "ESPEC")
        self.assertTrue(e.exception.message.endswith(
            "x.yaml:2:1: error: duplicate key 'family' (first defined at 1:1)"))
        self.assertIn("^", e.exception.detail)


class OpSourceTests(unittest.TestCase):
    """The torch ops' schemas and the extension's tables, for every shipped
    symbol, without PyTorch: the parameters obey Python's order (nothing
    without a default after a default) and every C argument has its place
    on both stacks."""

    def test_every_symbol_makes_schemas_and_a_table(self):
        from jitk import _ops
        with jitk.Compiler(specs=SPECS, cache_dir="") as c:
            d = c.describe()
        n = 0
        for sym in d["symbols"]:
            spec = _ops.OpSpec(sym)
            if spec.reason:
                continue
            for schema in ([] if spec.no_functional else [spec.schema()]) + [spec.out_schema()]:
                params = schema[1:schema.index(") -> ")].split(", ")
                seen_default = False
                for p in params:
                    if p == "*":
                        break
                    if "=" in p:
                        seen_default = True
                    else:
                        self.assertFalse(seen_default, f"{sym['name']}{schema}: {p} after a default")
            t = spec.table()
            for a in t["args"]:
                self.assertLess(a[6], t["no"], (spec.name, a))
                self.assertTrue(-1 <= a[5] < t["nf"], (spec.name, a))
                self.assertEqual(a[5] == -1, a[2] == "o", (spec.name, a))
            n += 1
        self.assertGreater(n, 20)


class ArgumentTests(unittest.TestCase):
    """Hostile arguments: refused with ValueError/TypeError (jitk.Error
    subclasses with status EINVAL) before C sees them, never truncated or
    wrapped around."""

    def setUp(self):
        self.c = jitk.Compiler(specs=SPECS, cache_dir="")

    def tearDown(self):
        self.c.close()

    def assertArgumentError(self, kind, text, fn, *args, **kw):
        with self.assertRaises(kind) as e:
            fn(*args, **kw)
        self.assertIsInstance(e.exception, jitk.Error)
        self.assertEqual(e.exception.status, "EINVAL")
        self.assertIn(text, e.exception.message)
        return e.exception

    def test_nul_in_strings(self):
        v, t = ValueError, "contains a NUL character"
        # 'sm_90\0x' would reach C as 'sm_90' and "run"
        self.assertArgumentError(v, "arch 'sm_90\\x00x' " + t, self.c.explain,
                                 "static_quant_fp8", "sm_90\0x")
        self.assertArgumentError(v, t, self.c.explain, "static_quant_fp8\0junk", "sm_90")
        self.assertArgumentError(v, t, self.c.explain, "static_quant_fp8", b"sm_90\0")
        self.assertArgumentError(v, t, self.c.precompile, "static_quant_fp8", "sm_90\0")
        self.assertArgumentError(v, "specs", jitk.Compiler, specs=SPECS + "\0/elsewhere",
                                 cache_dir="")
        self.assertArgumentError(v, "cache_dir", jitk.Compiler, specs=SPECS, cache_dir="\0")
        self.assertArgumentError(v, "cache_path", jitk.Compiler, specs=SPECS, cache_dir="",
                                 cache_path="/a\0:/b")
        self.assertArgumentError(v, "specs", jitk.Runtime, specs="\0", cache_dir="")

    def test_wrong_types(self):
        t = TypeError
        self.assertArgumentError(t, "name must be a str, not int", self.c.explain, 123, "sm_90")
        self.assertArgumentError(t, "arch must be a str, not list", self.c.explain,
                                 "static_quant_fp8", ["sm_90"])
        # "no" is truthy: it would have turned compiling off
        self.assertArgumentError(t, "no_compile must be True, False or None, not str",
                                 jitk.Compiler, specs=SPECS, no_compile="no")
        self.assertArgumentError(ValueError, "device 'abc' is not a CUDA device", jitk.Runtime,
                                 device="abc")
        self.assertArgumentError(t, "device must be an int, 'cuda:N' or a torch.device, not float",
                                 jitk.Runtime, device=0.5)
        self.assertArgumentError(t, "device must be an int, 'cuda:N' or a torch.device, not bool",
                                 jitk.Runtime, device=True)

    def test_values_out_of_range(self):
        v = ValueError
        # 2**40 would wrap to device 0 in a C int
        self.assertArgumentError(v, "device 1099511627776 is out of range", jitk.Runtime,
                                 device=2 ** 40)
        self.assertArgumentError(v, "device -1 is out of range", jitk.Runtime, device=-1)
        self.assertArgumentError(v, "capture must be 'error' or 'resolve', not 'bogus'",
                                 jitk.Runtime, capture="bogus")

    def test_library_einval_is_a_value_error(self):
        e = self.assertArgumentError(ValueError, "'hopper' is not an architecture",
                                     self.c.explain, "static_quant_fp8", "hopper")
        self.assertIsInstance(e, jitk.ArgumentError)

    def test_call_and_preload_arguments(self):
        # checked before anything reaches the library: the argument kinds
        # come from the spec (describe), values are checked against them
        kinds = {a["name"]: a["kind"] for a in
                 self.c.describe("static_quant_fp8")["symbols"][0]["args"]}
        self.assertEqual(kinds, {"q": "tensor", "x": "tensor", "input_scale": "tensor",
                                 "n": "i64"})
        kinds["m"] = "i32"
        kinds["eps"] = "f32"

        def no_tensor(v, name):
            raise jitk.ArgumentTypeError(f"{name} must be a torch.Tensor, not {type(v).__name__}")
        v, t = ValueError, TypeError
        make = jitk._core._make_args
        self.assertArgumentError(v, "n 18446744073709551616 is out of range", make, kinds,
                                 {"n": 2 ** 64}, no_tensor)
        self.assertArgumentError(v, "m 2147483648 is out of range", make, kinds,
                                 {"m": 2 ** 31}, no_tensor)
        self.assertArgumentError(v, "eps 1e+39 does not fit in a 32-bit float", make, kinds,
                                 {"eps": 1e39}, no_tensor)
        self.assertArgumentError(t, "n must be an int, not bool", make, kinds, {"n": True},
                                 no_tensor)
        self.assertArgumentError(t, "x must be a torch.Tensor, not str", make, kinds,
                                 {"x": "3"}, no_tensor)
        arr, n, keep = make(kinds, {"n": 5, "m": 7, "eps": 0.5, "x": None}, no_tensor)
        self.assertEqual((arr[0].name, arr[0].v.i64, arr[1].v.i32, arr[2].v.f32),
                         (b"n", 5, 7, 0.5))
        self.assertEqual((n, keep), (3, []))  # a tensor given as None is left out
        rt = jitk.Runtime.__new__(jitk.Runtime)
        rt._h, rt.device = None, 0
        self.assertArgumentError(t, "names must be a list of selectors, not one string",
                                 rt.preload, "static_quant_fp8")
        self.assertArgumentError(v, "names[1] 'b\\x00' contains a NUL", rt.preload, ["a", "b\0"])
        self.assertArgumentError(t, "names must not hold None", rt.preload, ["a", None])
        self.assertArgumentError(v, "name 'x\\x00' contains a NUL", rt.stats, "x\0")
        self.assertArgumentError(v, "mode must be 'strict', 'try' or 'auto', not 'fast'",
                                 rt.call, "static_quant_fp8", "fast")


class DeviceTests(unittest.TestCase):
    """issue 22 #17: a device is an int, "cuda", "cuda:N" or a torch.device
    (test_torch_cpu.py: torch.device) wherever one is taken."""

    def setUp(self):
        from jitk import _ops
        self.made = []
        made = self.made

        class StandIn:  # the library's runtime needs a GPU
            def __init__(self, device=None):
                made.append(device)
        self.saved = (_ops._core.Runtime, dict(_ops._runtimes))
        _ops._core.Runtime = StandIn
        _ops._runtimes.clear()

    def tearDown(self):
        from jitk import _ops
        _ops._core.Runtime = self.saved[0]
        _ops._runtimes.clear()
        _ops._runtimes.update(self.saved[1])

    def test_cuda_strings_and_ints(self):
        d = jitk._core._device
        self.assertEqual([d(0), d(3), d("cuda:1"), d("cuda:12")], [0, 3, 1, 12])
        self.assertIn(d("cuda"), range(64))  # the current device (0 without PyTorch)
        self.assertEqual(d(None), d("cuda"))
        # the ops' runtimes are one per device index, however it is spelled
        a = jitk.runtime("cuda:1")
        self.assertIs(jitk.runtime(1), a)
        self.assertIsNot(jitk.runtime(0), a)
        self.assertEqual(self.made, [1, 0])
        for bad, kind, text in [("cpu", ValueError, "device 'cpu' is not a CUDA device"),
                                ("cuda:", ValueError, "device 'cuda:' is not a CUDA device"),
                                ("cuda:1 ", ValueError, "device 'cuda:1 ' is not a CUDA device"),
                                ("cuda:-1", ValueError, "device 'cuda:-1' is not a CUDA device"),
                                (-1, ValueError, "device -1 is out of range"),
                                (1.0, TypeError, "device must be an int, 'cuda:N' or a "
                                 "torch.device, not float")]:
            with self.assertRaises(kind) as e:
                jitk.runtime(bad)
            self.assertIsInstance(e.exception, jitk.Error)
            self.assertIn(text, e.exception.message)


class WithoutTorchTests(unittest.TestCase):
    """What docs/python.md's install check and the ops' helpers do where
    PyTorch does not import (a subprocess that hides it): jitk errors, not
    AttributeError or ModuleNotFoundError."""

    def test_install_check_runtime_and_configure(self):
        import subprocess
        code = "\n".join([
            "import sys; sys.modules['torch'] = None  # import torch raises ImportError",
            "import jitk",
            "print(jitk.version() != '', jitk.ops)",
            "print(jitk.ops_error.message)",
            "try:",
            "    jitk.configure('fused_norm_scale_shift_fp8', 'input_scale', 0.5)",
            "except jitk.ArgumentTypeError as e:",
            "    print(e.message)",
            "try:",
            "    jitk.runtime('cuda:0')",
            "except jitk.Error as e:",  # no GPU here: the driver's error, from jitk
            "    print('jitk.Error')",
            "else:",
            "    print('jitk.Error')",  # a GPU: a runtime
        ])
        env = dict(os.environ)
        if not os.environ.get("JITK_TEST_INSTALLED"):
            env["PYTHONPATH"] = os.path.join(ROOT, "bindings", "python")
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines(), [
            "True None",
            "PyTorch does not import here (import of torch halted; None in sys.modules): no ops",
            "input_scale must be a torch.Tensor or a tensor with __dlpack__, not float",
            "jitk.Error"])


class RuntimeOptionTests(unittest.TestCase):
    """Runtime(seal=, manifest=) are checked before the library is asked
    for a device; without one the library's own error follows."""

    def test_bad_values_before_the_device(self):
        with self.assertRaisesRegex(jitk.ArgumentError, "seal must be 'off', 'warn' or 'error'"):
            jitk.Runtime(seal="sometimes")
        with self.assertRaises(jitk.ArgumentTypeError):
            jitk.Runtime(manifest=3)
        try:
            jitk.Runtime(seal="error", manifest=os.path.join(tempfile.mkdtemp(), "m"))
        except jitk.Error as e:  # no GPU here: the library's ENODEV, not an argument error
            self.assertNotIsInstance(e, jitk.ArgumentError)
            self.assertIn("ENODEV", str(e))


class OptionsTests(unittest.TestCase):
    """The ctypes mirrors of the option structs are jitk.h's current ones
    (issue 26: they were a version behind): the library's own defaults land
    in the fields where the header puts them, and the versions are the
    header's."""

    def test_mirrors_are_the_current_versions(self):
        import ctypes
        import re
        c = jitk._core
        o = c._CompilerOptions()
        self.assertEqual(c._compiler_options_init(ctypes.byref(o), c._COMPILER_OPTIONS_VERSION), 0)
        self.assertEqual((o.version, o.no_compile, o.log_level, o.cache_read_only), (3, -1, -1, -1))
        self.assertEqual((o.remote_read_only, o.remote_connect_timeout_ms, o.remote_timeout_ms,
                          o.remote_lease_ttl_ms, o.require_sigs), (-1, -1, -1, -1, -1))
        self.assertIsNone(o.signing_key)
        r = c._RuntimeOptions()
        self.assertEqual(c._runtime_options_init(ctypes.byref(r), c._RUNTIME_OPTIONS_VERSION), 0)
        self.assertEqual((r.version, r.device, r.seal), (4, 0, -1))
        self.assertIsNone(r.manifest)
        self.assertNotEqual(c._runtime_options_init(ctypes.byref(r), 5), 0)  # a newer one
        header = os.path.join(ROOT, "runtime", "include", "jitk.h")
        if os.path.exists(header):
            with open(header) as f:
                text = f.read()
            for name, mine in (("COMPILER", c._COMPILER_OPTIONS_VERSION),
                               ("RUNTIME", c._RUNTIME_OPTIONS_VERSION)):
                m = re.search(rf"#define JITK_{name}_OPTIONS_VERSION (\d+)", text)
                self.assertEqual(int(m.group(1)), mine, name)


class OutputShapeTests(unittest.TestCase):
    """A family added as data gets a functional op whenever its inputs
    decide the outputs (issue 26): x: [rows, 2 * hidden] gives
    y: [rows, hidden] from the instance whose input shapes match, as the
    library's call selects one; a name nothing gives leaves the .out op."""

    @staticmethod
    def spec(x_dim, y_dim="hidden"):
        from jitk import _ops
        return _ops.OpSpec({
            "name": "glu", "instances": [{"name": "glu[hidden=3072]",
                                          "params": {"hidden": 3072, "vec": 8}},
                                         {"name": "glu[hidden=12288]",
                                          "params": {"hidden": 12288, "vec": 8}}],
            "params": [{"name": "hidden", "type": "int", "values": [3072, 12288]},
                       {"name": "vec", "type": "int", "values": [8]}],
            "args": [{"name": "y", "kind": "tensor", "dtype": "bf16", "io": "out",
                      "shape": ["rows", y_dim]},
                     {"name": "x", "kind": "tensor", "dtype": "bf16", "io": "in",
                      "shape": ["rows", x_dim]},
                     {"name": "rows", "kind": "i64"}]})

    def shape_of_y(self, s, x_shape):
        """y's shape as the extension computes it: the first instance whose
        input shapes match gives the parameters."""
        from jitk import _schema
        dims = {s._index["x"]: x_shape}
        shape, _ = s.programs["y"]
        params = None
        if s.select:
            for values, checks in s.selection:
                if all(dims[a][d] == _schema.run_program(p, dims=dims, params=values)
                       for a, d, p in checks):
                    params = values
                    break
        return [_schema.run_program(p, dims=dims, params=params) for p in shape]

    def test_the_instance_decides(self):
        for x_dim, x_cols, want in (("2 * hidden", 6144, 3072), ("hidden * 2", 24576, 12288),
                                    ("hidden + 16", 3088, 3072), ("3 * hidden + vec", 9224, 3072),
                                    ("hidden * hidden", 3072 * 3072, 3072),
                                    ("hidden / 2", 6144, 12288)):
            s = self.spec(x_dim)
            self.assertIsNone(s.no_functional, x_dim)
            self.assertTrue(s.select, x_dim)
            self.assertEqual(self.shape_of_y(s, (5, x_cols)), [5, want], x_dim)
        s = self.spec("2 * hidden", y_dim="hidden / 2")
        self.assertEqual(self.shape_of_y(s, (5, 6144)), [5, 1536])
        # x's own dimension, where it names hidden bare: no selection
        s = self.spec("hidden")
        self.assertFalse(s.select)
        self.assertEqual(self.shape_of_y(s, (5, 777)), [5, 777])

    def test_a_name_nothing_gives_keeps_only_out(self):
        s = self.spec("2 * hidden", y_dim="width")
        self.assertIn("'width'", s.no_functional)
        self.assertEqual(s.out_schema(), "(Tensor x, *, Tensor(a!) y) -> ()")


class EnvTests(unittest.TestCase):
    """The package's boolean environment variables parse as the library's
    (issue 22 #4): any case of 1/true/yes/on and 0/false/no/off; anything
    else one warning and the meaning that does less."""

    def flag(self, value, default=True, unknown=False):
        import warnings
        name = "JITK_TEST_FLAG"
        saved = os.environ.get(name)
        os.environ[name] = value
        jitk._core._env_warned.discard(name)
        try:
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                got = jitk._core._env_flag(name, default, unknown)
                jitk._core._env_flag(name, default, unknown)  # warned once
        finally:
            if saved is None:
                del os.environ[name]
            else:
                os.environ[name] = saved
        return got, [str(x.message) for x in w]

    def test_values(self):
        for v in ("1", "true", "TRUE", "Yes", "on", "ON"):
            self.assertEqual(self.flag(v, default=False, unknown=False), (True, []), v)
        for v in ("0", "false", "False", "NO", "off", "Off"):
            self.assertEqual(self.flag(v, default=True, unknown=True), (False, []), v)
        self.assertEqual(self.flag("", default=True), (True, []))  # empty: unset
        for v in ("2", " 1", "y", "enable", "tru\u0435"):
            got, warned = self.flag(v, default=True, unknown=False)
            self.assertFalse(got, v)
            self.assertEqual(len(warned), 1, v)
            self.assertIn(f"JITK_TEST_FLAG={v!r} is not one of 1/true/yes/on or "
                          "0/false/no/off: taken as off", warned[0])

    @unittest.skipIf(os.environ.get("JITK_TEST_INSTALLED"), "the source tree's build backend")
    def test_torch_ext_switch(self):
        import contextlib
        import importlib.util
        import io
        spec = importlib.util.spec_from_file_location(
            "jitk_backend", os.path.join(ROOT, "bindings", "python", "_build", "backend.py"))
        backend = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(backend)
        saved = os.environ.get("JITK_TORCH_EXT")
        try:
            for v, said in [("OFF", "JITK_TORCH_EXT=OFF: no jitk._torch"),
                            ("False", "JITK_TORCH_EXT=False: no jitk._torch"),
                            ("2", "warning: JITK_TORCH_EXT='2' is not one of")]:
                os.environ["JITK_TORCH_EXT"] = v
                out = io.StringIO()
                with contextlib.redirect_stdout(out):
                    self.assertEqual(backend.torch_extension("include", "out"), [])
                self.assertIn(said, out.getvalue())
        finally:
            if saved is None:
                os.environ.pop("JITK_TORCH_EXT", None)
            else:
                os.environ["JITK_TORCH_EXT"] = saved


class RuntimeWithoutGpuTests(unittest.TestCase):
    def test_runtime_needs_a_driver(self):
        if os.path.exists("/dev/nvidia0") or os.path.exists("/dev/nvidiactl"):
            self.skipTest("a GPU is present")
        try:
            import ctypes
            ctypes.CDLL("libcuda.so.1")
            self.skipTest("a CUDA driver is present")
        except OSError:
            pass
        with self.assertRaises(jitk.Error) as e:
            jitk.Runtime(specs=SPECS, cache_dir="")
        self.assertEqual(e.exception.status, "ENODEV")
        self.assertIn("libcuda.so.1", e.exception.message)


class StaleScaleTests(unittest.TestCase):
    def test_a_warning_made_an_error_still_leaves_the_scale_unconfigured(self):
        # a configured scale written since configure is forgotten before
        # the warning (as jitk/_torch.cpp does), so a filter that turns the
        # warning into an error cannot leave it taken as validated
        import warnings
        rt = jitk.Runtime.__new__(jitk.Runtime)
        rt._h, rt.device = None, 0
        rt._configured, rt._configured_keep = {0x1000: 3, 0x2000: 5}, {0x1000: "kept"}
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with self.assertRaisesRegex(RuntimeWarning, "0x1000 was written after configure"):
                rt._stale(0x1000)
        self.assertEqual((rt._configured, rt._configured_keep), ({0x2000: 5}, {}))
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            rt._stale(0x1000)  # forgotten already: no second warning
        self.assertEqual(w, [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
