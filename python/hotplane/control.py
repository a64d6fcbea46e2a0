"""Client for a running data plane's control socket (newline-delimited JSON over a UNIX socket;
docs/control-api.md)."""

from __future__ import annotations

import json
import os
import socket
from typing import Any, Iterable, Optional


class HotplaneError(RuntimeError):
    """The data plane refused a request; the message says why."""


def default_socket() -> str:
    return os.environ.get("HOTPLANE_SOCKET", "/tmp/hotplane.sock")


class Client:
    def __init__(self, path: Optional[str] = None, timeout: float = 30.0):
        self.path = path or default_socket()
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        self._sock.connect(self.path)
        self._file = self._sock.makefile("rb")

    def close(self) -> None:
        self._file.close()
        self._sock.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def call(self, op: str, **fields: Any) -> Any:
        req = {"op": op, **{k: v for k, v in fields.items() if v is not None}}
        self._sock.sendall(json.dumps(req).encode() + b"\n")
        line = self._file.readline()
        if not line:
            raise HotplaneError("connection closed before a response")
        resp = json.loads(line)
        if not resp.get("ok"):
            raise HotplaneError(resp.get("error", "refused without a reason"))
        return resp.get("result")

    def stats(self) -> dict:
        return self.call("stats")

    def slots(self) -> list:
        return self.call("slots")

    def flows(self, worker: Optional[int] = None) -> list:
        return self.call("flows", worker=worker)

    def predefined(self) -> list:
        return self.call("predefined")

    def metrics(self) -> str:
        return self.call("metrics")["text"]

    def install(self, target: str, stage: dict, worker: Optional[int] = None) -> dict:
        return self.call("install", target=target, stage=stage, worker=worker)

    def switch(self, target: str, id: int, worker: Optional[int] = None) -> dict:
        return self.call("switch", target=target, id=id, worker=worker)

    def remove(self, target: str, worker: Optional[int] = None) -> dict:
        return self.call("remove", target=target, worker=worker)

    def update(self, datagrams: Iterable[bytes]) -> list:
        """Submit envelope datagrams; returns one acknowledgement per datagram."""
        return self.call("update", fragments=[d.hex() for d in datagrams])

    def shutdown(self) -> None:
        self.call("shutdown")
