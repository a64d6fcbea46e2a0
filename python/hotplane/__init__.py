"""Python SDK for hotplane: update envelopes, scapy layers and the control-API client."""

from . import envelope
from .control import Client, HotplaneError
from .envelope import Ack, Kind, build, parse, verify

__all__ = ["envelope", "wasp", "Client", "HotplaneError", "Ack", "Kind", "build", "parse", "verify"]
__version__ = "0.1.0"


def __getattr__(name):
    # `hotplane.wasp` (scapy layer, assembler, builder) loads scapy: imported on first use only.
    if name == "wasp":
        import importlib
        return importlib.import_module(".wasp", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
