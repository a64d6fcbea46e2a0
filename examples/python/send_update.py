"""Replace a flow's function on a running hotplane (started with examples/config/flows.toml)
through the control socket, with an update authenticated exactly as an in-band packet would be.

    python3 examples/python/send_update.py
"""
import json
import pathlib

from hotplane import Client, envelope

key = bytes.fromhex(pathlib.Path("examples/config/demo-key.hex").read_text().strip())
stage = {"stage": "set-field", "base": "payload", "offset": 16, "value": "0x000000aa"}
datagrams = envelope.build("flow:proto=udp,sport=1024", envelope.Kind.NATIVE_STAGE,
                           json.dumps(stage).encode(), key_id=1, key=key, seq=envelope.next_seq())
with Client() as c:
    for ack in c.update(datagrams):
        print(ack)
    print(json.dumps(c.flows(), indent=2))
