"""DLPack for the generic call: any object with __dlpack__ (CuPy, JAX,
PyTorch...) is exported on the stream the kernel will run on, and its
DLTensor handed to jitk_op_call_dlpack.

The capsule protocol (DLPack 0.6 to 1.x): __dlpack__(stream=S,
max_version=(1, 0)) gives a "dltensor_versioned" capsule (a
DLManagedTensorVersioned: version, manager_ctx, deleter, flags, then the
DLTensor) where the producer knows DLPack 1.0, else a "dltensor" capsule
(a DLManagedTensor, the DLTensor first). jitk reads the tensor while the
capsule is alive and never renames it, so the capsule's destructor calls
the producer's deleter: the producer keeps ownership throughout.
"""
import ctypes as _c
import operator

__all__ = ["DLTensor", "DLManagedTensor", "DLManagedTensorVersioned", "export", "view",
           "framework_stream", "device", "device_name", "READ_ONLY"]

READ_ONLY = 1  # DLPACK_FLAG_BITMASK_READ_ONLY
CUDA, CUDA_MANAGED = 2, 13  # DLDeviceType: kDLCUDA, kDLCUDAManaged
CUDA_DEVICES = (CUDA, CUDA_MANAGED)
_DEVICE_NAMES = {1: "the CPU", 3: "CUDA pinned host memory", 4: "an OpenCL device",
                 7: "a Vulkan device", 8: "a Metal device", 9: "a VPI device",
                 10: "a ROCm device", 11: "ROCm pinned host memory", 12: "an extension device",
                 14: "a oneAPI device", 15: "a WebGPU device", 16: "a Hexagon DSP",
                 17: "a MAIA device"}


def device_name(kind, index):
    """Where a DLPack device type puts a tensor, in words."""
    if kind in CUDA_DEVICES:
        return f"cuda:{index}"
    return _DEVICE_NAMES.get(kind, f"DLPack device type {kind}")


def device(v, what):
    """(device_type, device_id) from v.__dlpack_device__(), or None when v
    has none; ValueError when it fails or answers something else."""
    if not hasattr(v, "__dlpack_device__"):
        return None
    try:
        kind, index = v.__dlpack_device__()
        return operator.index(kind), operator.index(index)
    except Exception as e:  # noqa: BLE001 - whatever the producer raises
        raise ValueError(f"{what}: __dlpack_device__() failed: {type(e).__name__}: "
                         f"{e}") from None


class DLDevice(_c.Structure):
    _fields_ = [("device_type", _c.c_int), ("device_id", _c.c_int32)]


class DLDataType(_c.Structure):
    _fields_ = [("code", _c.c_uint8), ("bits", _c.c_uint8), ("lanes", _c.c_uint16)]


class DLTensor(_c.Structure):
    _fields_ = [("data", _c.c_void_p), ("device", DLDevice), ("ndim", _c.c_int32),
                ("dtype", DLDataType), ("shape", _c.POINTER(_c.c_int64)),
                ("strides", _c.POINTER(_c.c_int64)), ("byte_offset", _c.c_uint64)]


_DELETER = _c.CFUNCTYPE(None, _c.c_void_p)


class DLManagedTensor(_c.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", _c.c_void_p), ("deleter", _DELETER)]


class DLPackVersion(_c.Structure):
    _fields_ = [("major", _c.c_uint32), ("minor", _c.c_uint32)]


class DLManagedTensorVersioned(_c.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", _c.c_void_p),
                ("deleter", _DELETER), ("flags", _c.c_uint64), ("dl_tensor", DLTensor)]


_api = _c.pythonapi
_is_valid = _api.PyCapsule_IsValid
_is_valid.restype, _is_valid.argtypes = _c.c_int, [_c.py_object, _c.c_char_p]
_get_pointer = _api.PyCapsule_GetPointer
_get_pointer.restype, _get_pointer.argtypes = _c.c_void_p, [_c.py_object, _c.c_char_p]

_VERSIONED_OFFSET = DLManagedTensorVersioned.dl_tensor.offset


def view(capsule, what):
    """(address of the DLTensor, read_only) of a DLPack capsule; ValueError
    for anything else (a used capsule, a DLPack major version jitk does not
    know)."""
    if _is_valid(capsule, b"dltensor_versioned"):
        p = _get_pointer(capsule, b"dltensor_versioned")
        m = DLManagedTensorVersioned.from_address(p)
        if m.version.major != 1:
            raise ValueError(f"{what}: DLPack {m.version.major}.{m.version.minor} is not a "
                             "version jitk reads (1.x)")
        return p + _VERSIONED_OFFSET, bool(m.flags & READ_ONLY)
    if _is_valid(capsule, b"dltensor"):
        return _get_pointer(capsule, b"dltensor"), False
    raise ValueError(f"{what}: __dlpack__ did not return an unused DLPack capsule")


def framework_stream(v, device):
    """The current CUDA stream of v's framework as an integer handle (0:
    the legacy default stream), or None when the framework has no stream
    to share (JAX): jitk then runs on the legacy default stream and waits
    for it before returning."""
    mod = type(v).__module__.split(".", 1)[0]
    if mod == "torch":
        import torch
        return torch.cuda.current_stream(device).cuda_stream
    if mod == "cupy":
        import cupy
        return cupy.cuda.get_current_stream().ptr
    return None


def export(v, stream, what):
    """v.__dlpack__ for a kernel on stream (an int handle; None: the
    legacy default stream): the capsule (keep it alive for the call).
    Whatever the producer raises (NumPy: "only supports stream=None", a
    BufferError) comes back as ValueError naming the argument."""
    s = 1 if not stream else stream  # DLPack: 1 is CUDA's legacy default stream
    try:
        try:
            return v.__dlpack__(stream=s, max_version=(1, 0))
        except TypeError:  # a producer older than DLPack 1.0's protocol
            pass
        try:
            return v.__dlpack__(stream=s)
        except TypeError:  # older still: no stream argument
            return v.__dlpack__()
    except Exception as e:  # noqa: BLE001 - whatever the producer raises
        raise ValueError(f"{what}: __dlpack__(stream={s}) failed: {type(e).__name__}: "
                         f"{e}") from None
