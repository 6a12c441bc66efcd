"""The Python binding with PyTorch on a GPU (run on the H200 by
bench/device_run.sh; skipped without torch or CUDA)."""
import os
import sys
import unittest

ROOT = os.environ.get("JITK_TEST_ROOT", os.getcwd())
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
import jitk  # noqa: E402

try:
    import torch
    import torch.nn.functional as F
    HAVE_GPU = torch.cuda.is_available()
except ImportError:
    HAVE_GPU = False


@unittest.skipUnless(HAVE_GPU, "needs PyTorch with CUDA")
class TorchTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.rt = jitk.Runtime(specs=os.path.join(ROOT, "specs"))

    def inputs(self, rows=1024, h=3072, seed=0):
        g = torch.Generator(device="cuda").manual_seed(seed)
        x = torch.randn(rows, h, device="cuda", generator=g).to(torch.bfloat16)
        res = torch.randn(rows, h, device="cuda", generator=g).to(torch.bfloat16)
        gate = (torch.randn(h, device="cuda", generator=g) * 0.5).to(torch.bfloat16)
        scale = (torch.randn(h, device="cuda", generator=g) * 0.2).to(torch.bfloat16)
        shift = (torch.randn(h, device="cuda", generator=g) * 0.2).to(torch.bfloat16)
        s = torch.tensor([0.4754464328289032], device="cuda")
        return x, res, gate, scale, shift, s

    def test_norm_matches_torch(self):
        x, _, _, scale, shift, _ = self.inputs()
        y = self.rt.fused_norm_scale_shift(x, scale, shift)
        ref = F.layer_norm(x.double(), (x.shape[1],), eps=1e-6) * (1 + scale.double()) + shift.double()
        rel = ((y.double() - ref).norm() / ref.norm()).item()
        self.assertLess(rel, 1e-2)

    def test_fused_equals_split_and_quantizer(self):
        x, res, gate, scale, shift, s = self.inputs(rows=127, h=5120)
        self.rt.configure_input_scale(s)
        y, q, rout, fused = self.rt.auto_norm_scale_shift_fp8(x, scale, shift, s, res, gate)
        self.assertTrue(fused)  # the repo's specs allow it on sm_90+
        y2, rout2 = self.rt.fused_scale_residual_norm_scale_shift(x, res, gate, scale, shift)
        q2 = self.rt.static_quant_fp8(y2, s)
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(y.view(torch.int16), y2.view(torch.int16)))
        self.assertTrue(torch.equal(rout.view(torch.int16), rout2.view(torch.int16)))
        self.assertTrue(torch.equal(q.view(torch.uint8), q2.view(torch.uint8)))
        # the residual is one fp32 FMA rounded to bf16: exact in float64
        # (bf16 products and sums fit), then rounded to fp32, then bf16
        want = (res.double() + gate.double() * x.double()).float().to(torch.bfloat16)
        self.assertTrue(torch.equal(rout.view(torch.int16), want.view(torch.int16)))

    def test_generic_call(self):
        x, _, _, _, _, s = self.inputs(rows=3, h=1536)
        q = torch.empty(x.numel(), dtype=torch.float8_e4m3fn, device="cuda")
        fallback, reason, inst = self.rt.call("static_quant_fp8", q=q, x=x.view(-1),
                                              input_scale=s)
        self.assertEqual((fallback, reason, inst), (False, None, "static_quant_fp8"))
        q2 = self.rt.static_quant_fp8(x, s)
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(q.view(torch.uint8), q2.view(torch.uint8).view(-1)))
        with self.assertRaises(jitk.ArgumentError) as e:
            self.rt.call("static_quant_fp8", q=q, x=x.view(-1), input_scale=s, n=5)
        self.assertIn("argument n is 5, but the tensors' shapes say 4608", e.exception.message)
        with self.assertRaises(jitk.ArgumentError) as e:
            self.rt.call("static_quant_fp8", q=q[:-1], x=x.view(-1), input_scale=s)
        self.assertIn("x: expected shape [4607], got [4608]", e.exception.message)

    def test_checks_before_launch(self):
        x, _, _, scale, shift, s = self.inputs(rows=4)
        with self.assertRaises(jitk.Error) as e:
            self.rt.fused_norm_scale_shift(x.float(), scale, shift)
        self.assertIn("x must be bf16, not a tensor of dtype code 2 bits 32", str(e.exception))
        with self.assertRaises(jitk.Error):
            self.rt.fused_norm_scale_shift(x.t(), scale, shift)  # shape and layout
        with self.assertRaises(jitk.Error):
            self.rt.fused_norm_scale_shift(x.cpu(), scale, shift)
        with self.assertRaises(jitk.Error):
            self.rt.fused_norm_scale_shift(x, scale[:-8], shift)
        with self.assertRaises(jitk.Error) as e:
            self.rt.fused_norm_scale_shift(x[:, :3000].contiguous(), scale[:3000], shift[:3000])
        self.assertIn("no instance for hidden=3000", e.exception.message)
        bad = torch.tensor([float("nan")], device="cuda")
        with self.assertRaises(jitk.Error):
            self.rt.configure_input_scale(bad)
        y, reason = self.rt.try_fused_norm_scale_shift_fp8(x, scale, shift, bad)
        self.assertIsNone(y)
        self.assertIn("was not validated with jitk_configure", reason)

    def test_current_stream(self):
        x, _, _, scale, shift, _ = self.inputs(rows=4096)
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            y = self.rt.fused_norm_scale_shift(x, scale, shift)
        side.synchronize()
        y2 = self.rt.fused_norm_scale_shift(x, scale, shift)
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(y.view(torch.int16), y2.view(torch.int16)))

    def test_stats(self):
        st = self.rt.stats("fused_norm_scale_shift[hidden=3072]")
        self.assertGreaterEqual(st["launches"], 1)
        self.assertEqual(st["compiles"] + st["cache_hits"], 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
