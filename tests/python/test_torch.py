"""The Python binding with PyTorch on a GPU (run on the H200 by
bench/device_run.sh; skipped without torch or CUDA)."""
import os
import sys
import unittest
import warnings

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

    def fresh(self):
        return jitk.Runtime(specs=os.path.join(ROOT, "specs"))

    def refused(self, rt, x, scale, shift, s):
        """The strict fused call refuses s as not validated; auto takes the
        split path."""
        with self.assertRaises(jitk.ArgumentError) as e:
            rt.fused_norm_scale_shift_fp8(x, scale, shift, s)
        self.assertIn("was not validated with jitk_configure", e.exception.message)
        *_, fused = rt.auto_norm_scale_shift_fp8(x, scale, shift, s)
        self.assertFalse(fused)

    def test_a_freed_configured_scale_does_not_validate_the_next_tensor_there(self):
        # issue 22 #16: PyTorch's caching allocator hands a freed tensor's
        # address to a later tensor of its size inside the same driver
        # allocation, where the buffer id the library checks is the same;
        # a never-configured -3.0 there took the fused path (29 of 48)
        x, _, _, scale, shift, _ = self.inputs(rows=8)
        rt = self.fresh()

        def lands_on(p, tries=64):
            """Up to tries new [-3.0] scales, all kept alive: the one at p, or None."""
            kept = []
            for _ in range(tries):
                kept.append(torch.tensor([-3.0], device="cuda"))
                if kept[-1].data_ptr() == p:
                    return kept[-1]
            return None
        # unconfigured and freed, the address is reused (the allocator does
        # it here), and what lands there is not validated
        s = torch.tensor([0.5], device="cuda")
        p = s.data_ptr()
        rt.configure_input_scale(s)
        rt.unconfigure(s)
        del s
        again = lands_on(p)
        self.assertIsNotNone(again, "the caching allocator did not reuse the address")
        self.refused(rt, x, scale, shift, again)
        del again
        # configured and dropped by the caller: the runtime holds it, so no
        # new tensor lands there, in the 48 trials
        for i in range(48):
            s = torch.tensor([0.5 + i], device="cuda")
            p = s.data_ptr()
            rt.configure_input_scale(s)
            del s
            self.assertIsNone(lands_on(p, tries=8 if i else 64), i)
            bad = torch.tensor([-3.0], device="cuda")
            self.refused(rt, x, scale, shift, bad)
        self.assertEqual(len(rt._configured), 48)
        for q in list(rt._configured):
            rt.unconfigure(q)
        rt.close()

    def test_a_configured_scale_written_in_place_is_no_longer_validated(self):
        # issue 22 #16: the same tensor, -3.0 written into it after configure
        x, _, _, scale, shift, _ = self.inputs(rows=8)
        rt = self.fresh()
        s = torch.tensor([0.5], device="cuda")
        rt.configure_input_scale(s)
        *_, fused = rt.auto_norm_scale_shift_fp8(x, scale, shift, s)
        self.assertTrue(fused)
        s.fill_(-3.0)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            self.refused(rt, x, scale, shift, s)
        self.assertIn("was written after configure", str(w[0].message))
        with self.assertRaises(jitk.ArgumentError):
            rt.configure_input_scale(s)  # -3.0: refused where it is checked
        s.fill_(2.0)
        rt.configure_input_scale(s)      # configured again after the write
        *_, fused = rt.auto_norm_scale_shift_fp8(x, scale, shift, s)
        self.assertTrue(fused)
        # a filter that makes the warning an error: the call raises it, and
        # the scale stays unconfigured (refused, with no second warning)
        s.fill_(-3.0)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with self.assertRaisesRegex(RuntimeWarning, "written after configure"):
                rt.auto_norm_scale_shift_fp8(x, scale, shift, s)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            self.refused(rt, x, scale, shift, s)
        self.assertEqual([m for m in w if "written after" in str(m.message)], [])
        rt.close()

    def test_devices_and_foreign_tensors(self):
        # issue 22 #17: a device as PyTorch spells it
        for d in (torch.device("cuda"), torch.device("cuda", torch.cuda.current_device()),
                  f"cuda:{torch.cuda.current_device()}", "cuda"):
            rt = jitk.Runtime(device=d, specs=os.path.join(ROOT, "specs"))
            self.assertEqual(rt.device, torch.cuda.current_device())
            rt.close()
        # issue 22 #12: a NumPy array is on the CPU (NumPy raised "only
        # supports stream=None" through the call)
        try:
            import numpy as np
        except ImportError:
            return
        x, _, _, _, _, s = self.inputs(rows=3, h=1536)
        q = torch.empty(x.numel(), dtype=torch.float8_e4m3fn, device="cuda")
        with self.assertRaises(jitk.ArgumentError) as e:
            self.rt.call("static_quant_fp8", q=q, x=np.zeros(x.numel(), np.float32),
                         input_scale=s)
        self.assertEqual(e.exception.message, f"x is on the CPU, not cuda:{self.rt.device}")

    def test_seal_and_manifest(self):
        """A runtime sealed after preload refuses what would compile, keeps
        running what it resolved, and its manifest names what it resolved."""
        import tempfile
        d = tempfile.mkdtemp(prefix="jitk-seal-")
        man = os.path.join(d, "warmup.txt")
        rt = jitk.Runtime(specs=os.path.join(ROOT, "specs"), cache_dir=os.path.join(d, "cache"),
                          manifest=man)
        rt.preload(["static_quant_fp8"])
        rt.seal("error")
        with self.assertRaisesRegex(jitk.Error, "ENOCOMPILE"):
            rt.preload(["per_token_quant_fp8"])
        rt.preload(["static_quant_fp8"])  # resolved before the seal: fine
        rt.seal("off")
        rt.preload(["per_token_quant_fp8"])
        rt.close()
        with open(man) as f:
            text = f.read()
        self.assertIn("static_quant_fp8", text)
        self.assertIn("per_token_quant_fp8", text)

    def test_stats(self):
        st = self.rt.stats("fused_norm_scale_shift[hidden=3072]")
        self.assertGreaterEqual(st["launches"], 1)
        self.assertEqual(st["compiles"] + st["cache_hits"], 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
