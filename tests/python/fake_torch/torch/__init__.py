"""A stand-in for PyTorch with only what accelmon_push calls, serving recorded data.

The data comes from tests/python/fixtures/torch_cuda.json, or from the file named by
FAKE_TORCH_FIXTURE; FAKE_TORCH_UUIDS replaces the devices' UUIDs. Tests may change it through
torch.cuda._fixture (a plain dict).
"""
import types

from . import cuda  # noqa: F401  (torch.cuda, as in the real package)

version = types.SimpleNamespace(cuda=cuda._fixture["version"]["cuda"],
                                hip=cuda._fixture["version"]["hip"])
__version__ = cuda._fixture["version"]["__version__"]
