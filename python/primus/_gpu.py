"""This rank's GPU in its heartbeats: memory in use and utilization, read through NVML.

libnvidia-ml.so.1 comes with the NVIDIA driver, not with a Python package, so it is loaded at
run time with ctypes; the first sample() tries once, and on a machine without the library, the
driver or a GPU every sample is empty, with no error and no warning. NVML numbers the GPUs it
can see; a rank numbers them as CUDA does, through CUDA_VISIBLE_DEVICES, whose entries (indexes
or UUIDs) say which NVML device a CUDA index is.

The heartbeat thread samples; the device is the one the main thread works on (note_device(),
called by should_stop(): CUDA's current device is a per-thread setting, so the heartbeat thread
cannot ask for it), else LOCAL_RANK modulo the number of visible GPUs, as primus.init() chooses.
"""

import ctypes
import sys

from . import _env

_NVML_SUCCESS = 0


class Memory(ctypes.Structure):
    """nvmlMemory_t: bytes."""
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                ("used", ctypes.c_ulonglong)]


class Utilization(ctypes.Structure):
    """nvmlUtilization_t: percent of the last sample period."""
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


_Device = ctypes.c_void_p  # nvmlDevice_t, an opaque pointer

_nvml = None       # the library once loaded and initialised
_tried = False     # loading was tried (once per process)
_handles = {}      # CUDA index -> NVML device handle, or None when there is none
_main_device = None


def _load():
    """The initialised NVML library, or None; tried once."""
    global _nvml, _tried
    if _tried:
        return _nvml
    _tried = True
    try:
        library = ctypes.CDLL("libnvidia-ml.so.1")
        library.nvmlInit_v2.restype = ctypes.c_int
        library.nvmlInit_v2.argtypes = []
        library.nvmlDeviceGetCount_v2.restype = ctypes.c_int
        library.nvmlDeviceGetCount_v2.argtypes = [ctypes.POINTER(ctypes.c_uint)]
        library.nvmlDeviceGetHandleByIndex_v2.restype = ctypes.c_int
        library.nvmlDeviceGetHandleByIndex_v2.argtypes = [ctypes.c_uint,
                                                          ctypes.POINTER(_Device)]
        library.nvmlDeviceGetHandleByUUID.restype = ctypes.c_int
        library.nvmlDeviceGetHandleByUUID.argtypes = [ctypes.c_char_p, ctypes.POINTER(_Device)]
        library.nvmlDeviceGetMemoryInfo.restype = ctypes.c_int
        library.nvmlDeviceGetMemoryInfo.argtypes = [_Device, ctypes.POINTER(Memory)]
        library.nvmlDeviceGetUtilizationRates.restype = ctypes.c_int
        library.nvmlDeviceGetUtilizationRates.argtypes = [_Device, ctypes.POINTER(Utilization)]
        if library.nvmlInit_v2() != _NVML_SUCCESS:
            return None
    except (OSError, AttributeError):
        return None  # no library, or one without these functions
    _nvml = library
    return _nvml


def visible_devices(text):
    """The entries of a CUDA_VISIBLE_DEVICES value, or None when it is unset (every GPU is
    visible). CUDA stops at the first entry that is not a device ("-1" hides them all)."""
    if text is None:
        return None
    entries = []
    for entry in text.split(","):
        entry = entry.strip()
        if entry.isdigit() or entry.startswith(("GPU-", "MIG-")):
            entries.append(entry)
        else:
            break
    return entries


def note_device():
    """Called in the main thread: remembers torch's current CUDA device once torch.cuda is
    initialised (cheap before and after)."""
    global _main_device
    if _main_device is not None:
        return
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    try:
        if cuda is not None and cuda.is_initialized():
            _main_device = int(cuda.current_device())
    except Exception:  # noqa: BLE001 (a torch in a strange state: fall back to LOCAL_RANK)
        pass


def _local_rank():
    try:
        return int(_env.given("LOCAL_RANK") or 0)
    except ValueError:
        return 0


def _handle(nvml):
    """The NVML handle of this rank's device, or None."""
    visible = visible_devices(_env.raw("CUDA_VISIBLE_DEVICES"))
    if visible is None:
        count = ctypes.c_uint(0)
        if nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) != _NVML_SUCCESS:
            return None
        count = count.value
    else:
        count = len(visible)
    if count == 0:
        return None
    index = _main_device if _main_device is not None else _local_rank() % count
    if index in _handles:
        return _handles[index]
    device = _Device()
    if index >= count:
        status = -1
    elif visible is None:
        status = nvml.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(device))
    elif visible[index].isdigit():
        status = nvml.nvmlDeviceGetHandleByIndex_v2(int(visible[index]), ctypes.byref(device))
    else:
        status = nvml.nvmlDeviceGetHandleByUUID(visible[index].encode(), ctypes.byref(device))
    _handles[index] = device if status == _NVML_SUCCESS else None
    return _handles[index]


def sample():
    """{"gpu_memory_bytes", "gpu_utilization_ratio"} of this rank's GPU now; what NVML cannot
    tell (no GPU, no NVML, a MIG instance's utilization) is left out."""
    nvml = _load()
    if nvml is None:
        return {}
    device = _handle(nvml)
    if device is None:
        return {}
    result = {}
    memory = Memory()
    if nvml.nvmlDeviceGetMemoryInfo(device, ctypes.byref(memory)) == _NVML_SUCCESS:
        result["gpu_memory_bytes"] = int(memory.used)
    rates = Utilization()
    if nvml.nvmlDeviceGetUtilizationRates(device, ctypes.byref(rates)) == _NVML_SUCCESS:
        result["gpu_utilization_ratio"] = min(1.0, rates.gpu / 100.0)
    return result
