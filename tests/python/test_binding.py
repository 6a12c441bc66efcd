"""CPU tests of the Python binding (no GPU, no PyTorch needed): run by
tests/python.sh in CI."""
import os
import shutil
import sys
import tempfile
import unittest

ROOT = os.environ.get("JITK_TEST_ROOT", os.getcwd())
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
        self.assertEqual(len(names), 19)
        self.assertIn("fused_norm_scale_shift_fp8", names)
        self.assertIn("fused_norm_scale_shift_fp8[hidden=1536]", names)
        self.assertIn("static_quant_fp8", names)

    def test_explain(self):
        c = jitk.Compiler(specs=SPECS, cache_dir="")
        runs, text = c.explain("fused_norm_scale_shift_fp8", "sm_90")
        self.assertTrue(runs)
        self.assertTrue(text.startswith("fused_norm_scale_shift_fp8 on sm_90: runs"))
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


if __name__ == "__main__":
    unittest.main(verbosity=2)
