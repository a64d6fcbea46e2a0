"""Python SDK for hotplane: update envelopes, scapy layers and the control-API client."""

from . import envelope
from .control import Client, HotplaneError
from .envelope import Ack, Kind, build, parse, verify

__all__ = ["envelope", "Client", "HotplaneError", "Ack", "Kind", "build", "parse", "verify"]
__version__ = "0.1.0"
