"""The generic call on CuPy and JAX arrays through DLPack (the H200; each
part skipped without its framework or a GPU):

    JITK_SPECS=specs:tests/families/specs python3 -m unittest -v tests/python/test_dlpack_gpu.py

CuPy: the test family's tadd3 on int32 arrays (CuPy has no bf16), on a
non-default CuPy stream (the kernel runs on CuPy's current stream), a
strided view included; JAX: the norm on bf16 arrays, equal byte for byte
to the same call on torch tensors.
"""
import os
import sys
import unittest

ROOT = os.environ.get("JITK_TEST_ROOT", os.getcwd())
if not os.environ.get("JITK_TEST_INSTALLED"):
    sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
import jitk  # noqa: E402

SPECS = os.path.join(ROOT, "specs") + ":" + os.path.join(ROOT, "tests", "families", "specs")


def have(mod):
    try:
        __import__(mod)
        return True
    except Exception:
        return False


def gpu():
    try:
        import ctypes
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


@unittest.skipUnless(gpu() and have("cupy"), "needs CuPy and a GPU")
class CupyTests(unittest.TestCase):
    def test_tadd3_on_cupy_stream(self):
        import cupy as cp
        rt = jitk.Runtime(specs=SPECS)
        wide = cp.arange(100 * 1024, dtype=cp.int32).reshape(100, 1024)
        x = wide[:, :256]                      # a strided view: sx = 1024
        y = cp.full((100, 256), 3, dtype=cp.int32)
        z = cp.arange(100 * 256, dtype=cp.int32).reshape(100, 256)
        out = cp.empty((100, 256), dtype=cp.int32)
        s = cp.cuda.Stream(non_blocking=True)
        with s:
            fallback, _, inst = rt.call("tadd3", "auto", out=out, x=x, y=y, z=z)
            s.synchronize()
        self.assertEqual((fallback, inst), (False, "tadd3[cols=256]"))
        self.assertTrue(bool((out == x + y + z).all()))
        with self.assertRaises(jitk.ArgumentError) as e:
            rt.call("tadd3", out=out, x=x, y=y, z=z[:, :64])
        self.assertIn("z: expected shape [100, 256], got [100, 64]", str(e.exception))
        print("\ncupy: tadd3 on a CuPy stream, a strided view: ok")


@unittest.skipUnless(gpu() and have("jax") and have("torch"), "needs JAX, PyTorch and a GPU")
class JaxTests(unittest.TestCase):
    def test_norm_on_jax_arrays(self):
        import jax
        import jax.numpy as jnp
        import numpy as np
        import torch
        dev = [d for d in jax.devices() if d.platform == "gpu"]
        if not dev:
            self.skipTest("JAX has no GPU")
        rt = jitk.Runtime(specs=SPECS)
        k = jax.random.split(jax.random.PRNGKey(0), 3)
        x = jax.random.normal(k[0], (64, 3072), jnp.float32).astype(jnp.bfloat16)
        scale = (jax.random.normal(k[1], (3072,)) * 0.2).astype(jnp.bfloat16)
        shift = (jax.random.normal(k[2], (3072,)) * 0.2).astype(jnp.bfloat16)
        y = jnp.zeros((64, 3072), jnp.bfloat16) + 0  # a buffer of its own, for jitk to write
        y.block_until_ready()
        rt.call("fused_norm_scale_shift", y=y, x=x, scale=scale, shift=shift)
        got = np.asarray(y.view(jnp.uint16))
        # the same on torch tensors
        tx, ts, th = (torch.from_dlpack(a) for a in (x, scale, shift))
        ty = torch.empty_like(tx)
        rt.call("fused_norm_scale_shift", y=ty, x=tx, scale=ts, shift=th)
        torch.cuda.synchronize()
        want = ty.view(torch.int16).cpu().numpy().view(np.uint16)
        self.assertTrue(np.array_equal(got, want))
        print("\njax: fused_norm_scale_shift on JAX arrays equals the torch call: ok")


if __name__ == "__main__":
    unittest.main(verbosity=2)
