"""The PEP 517 backend of jitk's Python package: no build dependencies.

build_wheel: copy the source tree (the directory two levels above this
package's pyproject.toml) into a temporary directory, so that the user's
config.ninja and build/ are never touched; run `sh configure
--without-tests` and `ninja build/libjitk.so` there (configure finds the
CUDA toolkit, installs missing Debian packages when it can, and fails with
one line when it cannot); write the ops' front end, jitk/ops/<family>.py
and .pyi, from the specs through that library (frontend); compile the
C++ extension jitk/_torch.cpp against libtorch where PyTorch imports
(torch_extension); write the wheel with jitk/lib/libjitk.so.0,
jitk/specs, jitk/templates and jitk/include inside.

Environment: JITK_CONFIGURE_ARGS (more ./configure options, e.g.
--cuda=DIR), CXX (the C++ compiler for _torch.cpp; default c++; one that
links libstdc++ into the extension statically is made to link PyTorch's
libstdc++.so instead, or the extension is left out, saying why: two C++
runtimes in one process crash the first time an op formats a number),
JITK_TORCH_EXT=0 (no _torch.cpp; the values of the library's switches: any
case of 1/true/yes/on, 0/false/no/off; anything else is warned about and
taken as 0).

In a source tree (after ninja; PYTHONPATH=bindings/python then uses them):

    python3 bindings/python/_build/backend.py torch-ext   # jitk/_torch*.so
    python3 bindings/python/_build/backend.py frontend    # jitk/ops/<family>.py, .pyi
"""
import base64
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # bindings/python
ROOT = os.path.dirname(os.path.dirname(HERE))                        # the source tree
NAME = "jitk"


def _version():
    with open(os.path.join(ROOT, "runtime", "include", "jitk", "version.h")) as f:
        m = re.search(r'#define JITK_VERSION "([^"]+)"', f.read())
    if not m:
        raise RuntimeError("jitk: no JITK_VERSION in runtime/include/jitk/version.h")
    return m.group(1)


def _tag():
    impl = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"{impl}-{impl}-{plat}"


def _metadata():
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {_version()}\n"
            "Summary: JIT kernel compiler and loader for CUDA: every spec symbol a PyTorch op\n"
            "Requires-Python: >=3.9\n")


def _dist_info():
    return f"{NAME}-{_version()}.dist-info"


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    d = os.path.join(metadata_directory, _dist_info())
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "METADATA"), "w") as f:
        f.write(_metadata())
    return _dist_info()


def _run(cmd, cwd):
    print("jitk build:", " ".join(shlex.quote(c) for c in cmd), flush=True)
    r = subprocess.run(cmd, cwd=cwd)
    if r.returncode:
        raise RuntimeError(f"jitk build: {' '.join(cmd)} failed with status {r.returncode}")


# top-level entries the library's build does not need
_SKIP = {".git", "build", "cache", "fuzz", "bench", "bindings", "docs", ".whl", ".dev",
         ".pydeps", "config.ninja", ".ninja_log", ".ninja_deps"}


def _ignore(d, names):
    top = os.path.samefile(d, ROOT)
    return [n for n in names if n == "__pycache__" or n.endswith(".o") or
            (top and (n in _SKIP or n.startswith("build-")))]


def _build_library(tmp):
    if not os.path.exists(os.path.join(ROOT, "configure")):
        raise RuntimeError(f"jitk build: no configure in {ROOT}; build from jitk's source tree "
                           "(pip install ./bindings/python)")
    src = os.path.join(tmp, "src")
    shutil.copytree(ROOT, src, ignore=_ignore, symlinks=True)
    os.makedirs(os.path.join(src, "cache"), exist_ok=True)
    args = shlex.split(os.environ.get("JITK_CONFIGURE_ARGS", ""))
    _run(["sh", "configure", "--without-tests"] + args, src)
    ninja = shutil.which("ninja") or shutil.which("ninja-build") or "ninja"
    _run([ninja, "build/libjitk.so"], src)
    return src


_DESCRIBE = """
import json, sys, types
pkg = types.ModuleType("jitk")  # jitk._core and jitk._frontend without the
pkg.__path__ = [sys.argv[1]]    # package's __init__ (no PyTorch, no ops)
sys.modules["jitk"] = pkg
from jitk import _core, _frontend
with _core.Compiler(specs=sys.argv[2], cache_dir="") as c:
    print(" ".join(_frontend.write(c.describe(), sys.argv[3])))
"""


def frontend(lib, specs, out):
    """Write the ops' front end (jitk/ops/<family>.py and .pyi) for the
    specs in specs, through the library lib, into out (a copy of
    jitk/ops); returns the families."""
    env = dict(os.environ, JITK_LIBRARY=lib)
    env.pop("JITK_SPECS", None)
    r = subprocess.run([sys.executable, "-c", _DESCRIBE, os.path.join(HERE, NAME), specs, out],
                       env=env, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"jitk build: the ops' front end: {r.stderr.strip()}")
    families = r.stdout.split()
    print(f"jitk build: jitk/ops: {len(families)} families", flush=True)
    return families


_TORCH_QUERY = """
import json, torch, torch.utils.cpp_extension as e
with open(e.__file__) as f:  # the C++ standard PyTorch builds its own extensions with
    std = "c++20" if "-std=c++20" in f.read() else "c++17"
print(json.dumps(dict(version=torch.__version__, abi=int(torch._C._GLIBCXX_USE_CXX11_ABI),
                      include=e.include_paths(), lib=e.library_paths(), cuda=e.CUDA_HOME,
                      std=std)))
"""


def torch_extension(include, out, cuda=None):
    """Compile jitk/_torch.cpp (the ops' C++ extension) against
    the PyTorch that this Python imports, into out, with _torch.version
    (the PyTorch it was built for: the package uses the module only with
    that one). Returns the files written; none, saying why, when PyTorch
    does not import here (pip's build isolation: install with
    --no-build-isolation to build it) or JITK_TORCH_EXT=0."""
    import json
    flag = os.environ.get("JITK_TORCH_EXT", "")
    if flag.lower() in ("0", "false", "no", "off"):
        print(f"jitk build: JITK_TORCH_EXT={flag}: no jitk._torch", flush=True)
        return []
    if flag and flag.lower() not in ("1", "true", "yes", "on"):  # as the library's switches
        print(f"jitk build: warning: JITK_TORCH_EXT={flag!r} is not one of 1/true/yes/on or "
              "0/false/no/off: taken as off, no jitk._torch", flush=True)
        return []
    r = subprocess.run([sys.executable, "-c", _TORCH_QUERY], capture_output=True, text=True)
    if r.returncode:
        print("jitk build: PyTorch does not import here: no jitk._torch (no ops; "
              "pip install --no-build-isolation where PyTorch is installed builds it)",
              flush=True)
        return []
    t = json.loads(r.stdout.strip().splitlines()[-1])
    cuda = cuda or t["cuda"] or "/usr/local/cuda"
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    target = os.path.join(out, "_torch" + suffix)
    cxx = os.environ.get("CXX", "c++")
    obj = os.path.join(out, "_torch.o")
    compile_cmd = shlex.split(cxx) + ["-c", "-fPIC", "-O2", "-std=" + t.get("std", "c++17"), "-Wall",
                                      "-fvisibility=hidden",
                                      f"-D_GLIBCXX_USE_CXX11_ABI={t['abi']}",
                                      f'-DJITK_TORCH_VERSION="{t["version"]}"',
                                      "-I" + sysconfig.get_paths()["include"], "-I" + include,
                                      "-I" + os.path.join(cuda, "include")]
    compile_cmd += ["-I" + d for d in t["include"]]
    compile_cmd += [os.path.join(HERE, "jitk", "_torch.cpp"), "-o", obj]
    # compiled once, linked once or twice (below): the compile is the
    # minute, the link a second
    cmd = shlex.split(cxx) + ["-shared", obj, "-o", target]
    libs = ["-L" + d for d in t["lib"]] + ["-lc10", "-lc10_cuda", "-ltorch", "-ltorch_cpu",
                                           "-ltorch_cuda"]
    try:
        _run(compile_cmd, out)
        _run(cmd + libs, out)
        return _checked_runtime(target, cmd, libs, out, t, cxx)
    finally:
        if os.path.exists(obj):
            os.remove(obj)


def _checked_runtime(target, cmd, libs, out, t, cxx):
    """The extension at target, linked by cmd + libs, linked again against
    PyTorch's libstdc++ when its compiler copied one in (or removed, saying
    why, when that cannot be undone); then its version stamp. Returns the
    files written."""
    if cxx_runtime_copied(target):
        # A compiler that links libstdc++ statically (one seen on a GPU
        # machine's image did, by default) puts a second C++ runtime in
        # the process beside PyTorch's: the two disagree on the locale's
        # facets, and the first number an error or warning of an op
        # formats crashed the process. Linked again against the
        # libstdc++ PyTorch loads, the extension takes every symbol that
        # one has from it.
        shared = torch_libstdcxx(t["lib"])
        print(f"jitk build: {cxx} linked a copy of libstdc++ into {os.path.basename(target)}; "
              f"linking again against PyTorch's ({shared or 'not found'})", flush=True)
        if shared:
            try:
                _run(cmd + [shared] + libs, out)
            except RuntimeError as e:
                print(e, flush=True)
                shared = None
        if not shared or cxx_runtime_copied(target):
            if os.path.exists(target):
                os.remove(target)
            print(f"jitk build: no jitk._torch: {cxx} links its own copy of libstdc++, which "
                  "cannot share a process with PyTorch's (set CXX to a compiler that links "
                  "libstdc++ as a shared library)", flush=True)
            return []
    stamp = os.path.join(out, "_torch.version")
    with open(stamp, "w") as f:
        f.write(t["version"] + "\n")
    return [target, stamp]


def cxx_runtime_copied(lib):
    """True when the shared object lib defines the C++ runtime's locale
    itself (libstdc++ linked into it statically) instead of taking it from
    libstdc++.so; False when it does not, or when nm cannot tell."""
    try:
        r = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True)
    except OSError:
        return False
    return r.returncode == 0 and re.search(r" _ZNSt6locale", r.stdout) is not None


def torch_libstdcxx(libdirs):
    """The libstdc++.so.6 that PyTorch's libc10 loads (ldd), or None."""
    for d in libdirs:
        c10 = os.path.join(d, "libc10.so")
        if not os.path.exists(c10):
            continue
        try:
            text = subprocess.run(["ldd", c10], capture_output=True, text=True).stdout
        except OSError:
            return None
        m = re.search(r"libstdc\+\+\.so[.0-9]* => (/\S+)", text)
        return m.group(1) if m else None
    return None


def _cuda_of(src):
    """The CUDA toolkit configure found (config.ninja's cuda), or None."""
    try:
        with open(os.path.join(src, "config.ninja")) as f:
            m = re.search(r"^cuda = (.+)$", f.read(), re.M)
        return m.group(1).strip() if m else None
    except OSError:
        return None


# What a machine with the NVIDIA driver, NVRTC (the toolkit, or the
# nvidia-cuda-nvrtc wheel PyTorch brings) and a C library has: the rest of
# what libjitk needs goes into the wheel (jitk/lib/, loaded first by
# jitk._core), the way auditwheel would. libcurl and hiredis are not among
# them: libjitk loads those only for the fleet tier (optlib.c).
_SYSTEM = ("libc.so", "libm.so", "libdl.so", "librt.so", "libpthread.so", "ld-linux",
           "libgcc_s.so", "libstdc++.so", "libnvrtc", "libcuda.so", "linux-vdso")


def _vendored(lib):
    """(soname, file) of each library lib needs (transitively) that is not
    the system's, from ldd."""
    try:
        text = subprocess.run(["ldd", lib], check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise RuntimeError(f"jitk build: ldd {lib}: {e}") from e
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == "=>":
            soname, path = parts[0], parts[2]
            if path == "not" or not os.path.exists(path):
                raise RuntimeError(f"jitk build: {lib} needs {soname}, which is not found")
            if not soname.startswith(_SYSTEM):
                out.append((soname, os.path.realpath(path)))
    return sorted(out)


def _files(src, exts, ops):
    """(path in the wheel, file on disk) of everything the wheel holds."""
    pkg = os.path.join(HERE, NAME)
    out = []
    for n in sorted(os.listdir(pkg)):
        if n.endswith(".py"):
            out.append((f"{NAME}/{n}", os.path.join(pkg, n)))
    for n in sorted(os.listdir(ops)):
        if n.endswith((".py", ".pyi")):
            out.append((f"{NAME}/ops/{n}", os.path.join(ops, n)))
    for ext in exts:
        out.append((f"{NAME}/{os.path.basename(ext)}", ext))
    lib = os.path.realpath(os.path.join(src, "build", "libjitk.so"))
    out.append((f"{NAME}/lib/libjitk.so.0", lib))
    for soname, path in _vendored(lib):
        out.append((f"{NAME}/lib/{soname}", path))
    for sub in ("specs", "templates", os.path.join("runtime", "include")):
        base = os.path.join(src, sub)
        dest = "include" if sub.startswith("runtime") else sub
        for d, _, names in os.walk(base):
            for n in sorted(names):
                rel = os.path.relpath(os.path.join(d, n), base)
                out.append((f"{NAME}/{dest}/{rel}", os.path.join(d, n)))
    return out


def _record_line(arc, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arc},sha256={digest},{len(data)}\n"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    tmp = tempfile.mkdtemp(prefix="jitk-wheel-")
    try:
        src = _build_library(tmp)
        ops = os.path.join(tmp, "ops")
        shutil.copytree(os.path.join(HERE, NAME, "ops"), ops,
                        ignore=lambda d, names: [n for n in names
                                                 if n not in ("__init__.py", "out.py")])
        frontend(os.path.join(src, "build", "libjitk.so"), os.path.join(src, "specs"), ops)
        exts = []
        try:
            exts += torch_extension(os.path.join(src, "runtime", "include"), tmp,
                                    _cuda_of(src))
        except Exception as e:  # noqa: BLE001 - the package works without it (no ops)
            print(f"jitk build: no jitk._torch: {e}", flush=True)
        name = f"{NAME}-{_version()}-{_tag()}.whl"
        path = os.path.join(wheel_directory, name)
        info = _dist_info()
        record = []
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
            for arc, disk in _files(src, exts, ops):
                with open(disk, "rb") as f:
                    data = f.read()
                zi = zipfile.ZipInfo(arc, date_time=(2026, 1, 1, 0, 0, 0))
                zi.external_attr = (0o755 if arc.endswith(".so") or ".so." in arc
                                    else 0o644) << 16
                zi.compress_type = zipfile.ZIP_DEFLATED
                z.writestr(zi, data)
                record.append(_record_line(arc, data))
            meta = {"METADATA": _metadata(),
                    "WHEEL": ("Wheel-Version: 1.0\nGenerator: jitk-backend\n"
                              f"Root-Is-Purelib: false\nTag: {_tag()}\n"),
                    "top_level.txt": NAME + "\n"}
            for n, text in meta.items():
                arc = f"{info}/{n}"
                z.writestr(zipfile.ZipInfo(arc, date_time=(2026, 1, 1, 0, 0, 0)), text)
                record.append(_record_line(arc, text.encode()))
            record.append(f"{info}/RECORD,,\n")
            z.writestr(zipfile.ZipInfo(f"{info}/RECORD", date_time=(2026, 1, 1, 0, 0, 0)),
                       "".join(record))
        return name
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv):
    if argv == ["torch-ext"]:
        return 0 if torch_extension(os.path.join(ROOT, "runtime", "include"),
                                    os.path.join(HERE, NAME), _cuda_of(ROOT)) else 1
    if argv == ["frontend"]:
        # the library the package would load: $JITK_LIBRARY, else the build's
        lib = os.environ.get("JITK_LIBRARY") or os.path.join(ROOT, "build", "libjitk.so")
        if not os.path.exists(lib):
            print(f"jitk build: no {lib}: run ninja first (or set JITK_LIBRARY)", file=sys.stderr)
            return 1
        frontend(lib, os.path.join(ROOT, "specs"), os.path.join(HERE, NAME, "ops"))
        return 0
    print("usage: backend.py torch-ext | frontend", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
