"""Client for a running data plane's control socket (newline-delimited JSON over a UNIX socket;
docs/control-api.md)."""

from __future__ import annotations

import json
import os
import socket
from typing import Any, Iterable, Optional


class HotplaneError(RuntimeError):
    """The data plane refused a request; the message says why."""


SYSTEM_SOCKET = "/run/hotplane/hotplane.sock"


def default_socket() -> str:
    """Where `socket = true` puts a data plane's socket, as `hotplane push` finds it:
    $HOTPLANE_SOCKET, else $HOTPLANE_RUNTIME_DIR/hotplane.sock, else /run/hotplane/hotplane.sock
    as root, else $XDG_RUNTIME_DIR/hotplane/hotplane.sock (or /tmp/hotplane-UID/), falling back
    to the system socket for a member of its group."""
    if os.environ.get("HOTPLANE_SOCKET"):
        return os.environ["HOTPLANE_SOCKET"]
    runtime = os.environ.get("HOTPLANE_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime):
        return os.path.join(runtime, "hotplane.sock")
    uid = os.geteuid()
    if uid == 0:
        return SYSTEM_SOCKET
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    base = os.path.join(xdg, "hotplane") if xdg and os.path.isabs(xdg) else f"/tmp/hotplane-{uid}"
    own = os.path.join(base, "hotplane.sock")
    if not os.path.exists(own) and os.path.exists(SYSTEM_SOCKET):
        return SYSTEM_SOCKET
    return own


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

    def ebpf_update(self, target: str, code: bytes, *, key: bytes, key_id: int = 1, kind: Optional[int] = None,
                    seq: Optional[int] = None, worker: Optional[int] = None, interpret: bool = False) -> dict:
        """Install eBPF code (an ELF object, C source or raw bytecode) at `target` as an
        authenticated update; returns the final acknowledgement. The kind is guessed from the
        code (ELF magic, else C if it looks like text, else bytecode) unless given."""
        from . import envelope
        if kind is None:
            if code.startswith(b"\x7fELF"):
                kind = envelope.Kind.EBPF_ELF
            elif all(32 <= b < 127 or b in (9, 10, 13) for b in code[:256]):
                kind = envelope.Kind.EBPF_C
            else:
                kind = envelope.Kind.EBPF_BYTECODE
        flags = envelope.Flags.NO_JIT if interpret else 0
        datagrams = envelope.build(target, kind, code, key_id=key_id, key=key,
                                   seq=seq if seq is not None else envelope.next_seq(),
                                   worker=envelope.WORKER_ALL if worker is None else worker, flags=flags,
                                   max_fragment=envelope.API_FRAGMENT)
        return self.update(datagrams)[-1]

    def lua_update(self, target: str, source, *, key: bytes, key_id: int = 1, seq: Optional[int] = None,
                   worker: Optional[int] = None, jit: bool = True, opt_level: Optional[int] = None) -> dict:
        """Install Lua source (a chunk returning `function(pkt)`) at `target` (`flow:SELECTOR`,
        `flow:default`, a position or `extern:NAME`) as an authenticated update; returns the
        final acknowledgement. Compile errors come back as `refused`/`rejected` with Lua's
        message, and the function that was running keeps running."""
        from . import envelope
        if isinstance(source, str):
            source = source.encode()
        flags = 0 if jit else envelope.Flags.NO_JIT
        if opt_level is not None:
            flags |= envelope.Flags.opt_level(opt_level)
        datagrams = envelope.build(target, envelope.Kind.LUA, source, key_id=key_id, key=key,
                                   seq=seq if seq is not None else envelope.next_seq(),
                                   worker=envelope.WORKER_ALL if worker is None else worker, flags=flags,
                                   max_fragment=envelope.API_FRAGMENT)
        return self.update(datagrams)[-1]

    def lua_functions(self) -> list:
        """Installed Lua functions: target, options, packets, errors, runaways, last error."""
        return self.call("lua-functions")

    def ebpf_maps(self) -> list:
        """Every eBPF map: name (program/map), kind, sizes, entries in use."""
        return self.call("ebpf-maps")

    def ebpf_map_dump(self, map: str) -> dict:
        """Every entry of a map; keys and values in hex (per-CPU maps: one value per worker)."""
        return self.call("ebpf-map-dump", map=map)

    def ebpf_map_update(self, map: str, key: bytes, value: bytes, flags: int = 0) -> None:
        self.call("ebpf-map-update", map=map, key="0x" + key.hex(), value="0x" + value.hex(), flags=flags)

    def ebpf_map_delete(self, map: str, key: bytes) -> None:
        self.call("ebpf-map-delete", map=map, key="0x" + key.hex())

    def shutdown(self) -> None:
        self.call("shutdown")
