"""torch.cuda stand-in: is_available, device_count, memory_stats,
memory_snapshot, get_device_properties — shaped like PyTorch 2.x's return values."""
import collections
import copy
import json
import os

_DEFAULT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "torch_cuda.json")
with open(os.environ.get("FAKE_TORCH_FIXTURE", _DEFAULT), encoding="utf-8") as _f:
    _fixture = json.load(_f)
# FAKE_TORCH_UUIDS=u0,u1,...: the devices' UUIDs, e.g. those of the agent's simulated devices.
for _d, _u in zip(_fixture["devices"], filter(None, os.environ.get("FAKE_TORCH_UUIDS", "").split(","))):
    _d["uuid"] = _u

# How often memory_snapshot() was called (the helper must rate-limit it).
snapshot_calls = 0


class _CUuuid:
    def __init__(self, text):
        self._text = text

    def __str__(self):  # PyTorch prints the bare 8-4-4-4-12 form, without NVML's "GPU-"
        return self._text


class _CudaDeviceProperties:
    def __init__(self, d):
        self.name = d["name"]
        self.total_memory = d["total_memory"]
        self.major, self.minor = 9, 0
        self.multi_processor_count = 132
        self.uuid = _CUuuid(d["uuid"])


def _index(device):
    i = 0 if device is None else int(getattr(device, "index", device))
    if not 0 <= i < device_count():
        raise AssertionError("Invalid device id")  # what PyTorch raises
    return i


def is_available():
    return bool(_fixture["devices"])


def device_count():
    return len(_fixture["devices"])


def memory_stats(device=None):
    return collections.OrderedDict(_fixture["devices"][_index(device)]["memory_stats"])


def memory_snapshot():
    global snapshot_calls
    snapshot_calls += 1
    return copy.deepcopy(_fixture["memory_snapshot"])


def get_device_properties(device):
    return _CudaDeviceProperties(_fixture["devices"][_index(device)])
