#!/bin/sh
# tests/pip_install.sh BUILD_DIR - the Python package as a user gets it:
# `pip install ./bindings/python` into a fresh venv, offline (--no-index:
# the package's build backend needs nothing from an index; it runs the
# project's configure and ninja in a copy of the tree), then the binding's
# CPU tests and `python -m jitk` from a directory outside the source tree,
# with jitk, its library, specs and templates all from the venv.
set -u
if ! command -v python3 >/dev/null 2>&1; then
	echo "SKIP: no python3"
	exit 77
fi
if grep -q '^san = -fsanitize' config.ninja 2>/dev/null; then
	echo "SKIP: sanitizer build (the plain build runs this)"
	exit 77
fi
root=$(pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/jitk-pip-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() {
	echo "FAIL: $*"
	exit 1
}
python3 -m venv "$tmp/venv" || fail "python3 -m venv failed (Debian: apt-get install python3-venv)"
py=$tmp/venv/bin/python
"$py" -m pip install -q --no-index --no-cache-dir "$root/bindings/python" >"$tmp/pip.log" 2>&1 ||
	{ tail -30 "$tmp/pip.log"; fail "pip install ./bindings/python"; }
"$py" -m pip wheel -q --no-index --no-deps -w "$tmp/wheel" "$root/bindings/python" >"$tmp/pip.log" 2>&1 ||
	{ tail -30 "$tmp/pip.log"; fail "pip wheel ./bindings/python"; }
ls "$tmp"/wheel/jitk-*.whl >/dev/null 2>&1 || fail "pip wheel made no jitk wheel"
# what the wheel holds: the library, the ops' front end (a module and a stub
# per family); jitk._torch only where the build's Python imports PyTorch
# (here the venv's, which has none)
names=$("$py" -c 'import sys, zipfile; print("\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))' \
	"$tmp"/wheel/jitk-*.whl) || fail "the wheel does not open as a zip file"
for want in jitk/lib/libjitk.so.0 jitk/specs/norm_scale_shift.yaml jitk/templates/common.cuh \
	jitk/include/jitk.h; do
	echo "$names" | grep -qx "$want" || fail "the wheel lacks $want"
done
for want in jitk/ops/__init__.py jitk/ops/out.py jitk/ops/norm_scale_shift.py \
	jitk/ops/norm_scale_shift.pyi jitk/ops/qk_norm_rope.pyi; do
	echo "$names" | grep -qx "$want" || fail "the wheel lacks $want (the ops' front end)"
done
# what libjitk needs beyond the C library and NVRTC is in the wheel (jitk/lib/,
# loaded first by jitk._core); libcurl and hiredis are not needed to load it
for want in jitk/lib/libyaml-0.so.2 jitk/lib/libcrypto.so.3; do
	echo "$names" | grep -qx "$want" || fail "the wheel lacks $want (a machine with only the driver has none)"
done
! echo "$names" | grep -Eq '^jitk/lib/lib(curl|hiredis)' || fail "the wheel vendors libcurl or hiredis (loaded only by the fleet tier)"
if "$py" -c 'import torch' 2>/dev/null; then
	echo "$names" | grep -qx 'jitk/_torch.version' || fail "PyTorch imports but the wheel lacks jitk._torch"
else
	! echo "$names" | grep -q '^jitk/_torch' || fail "no PyTorch, yet the wheel holds jitk._torch"
fi
mkdir "$tmp/elsewhere"
cd "$tmp/elsewhere" || exit 1
# the vendored copies are the ones in use (so a machine without libyaml and
# libcrypto imports jitk), and neither libcurl nor hiredis is loaded
maps=$(env -u JITK_LIBRARY -u PYTHONPATH "$py" -c 'import jitk; print(open("/proc/self/maps").read())') ||
	fail "import jitk from the venv"
for lib in libyaml-0.so.2 libcrypto.so.3; do
	echo "$maps" | grep "$lib" | grep -q "$tmp/venv/" ||
		fail "$lib is not loaded from the wheel: $(echo "$maps" | grep "$lib" | head -n 1)"
done
! echo "$maps" | grep -Eq 'libcurl|libhiredis' || fail "import jitk loaded libcurl or hiredis"
# no JITK_LIBRARY, no PYTHONPATH, no JITK_SPECS: everything from the venv
for t in test_binding test_package; do
	if ! env -u JITK_LIBRARY -u PYTHONPATH JITK_TEST_INSTALLED=1 JITK_TEST_ROOT="$root" \
		"$py" "$root/tests/python/$t.py" >"$tmp/$t.log" 2>&1; then
		cat "$tmp/$t.log"
		fail "the CPU tests of the installed package ($t.py)"
	fi
	tail -3 "$tmp/$t.log"
done
out=$(env -u JITK_LIBRARY -u PYTHONPATH "$py" -m jitk list static_quant_fp8) || fail "python -m jitk list"
echo "$out" | grep -q '^static_quant_fp8 ' || fail "python -m jitk list did not list static_quant_fp8"
echo "pip install, pip wheel, the installed package's tests and python -m jitk: ok"
