"""`p4.tmp.P4DeviceConfig`, the wrapper PI and BMv2 accept inside `p4_device_config`, for
Python clients that import `p4.tmp.p4config_pb2` (the p4lang tutorials' `p4runtime_lib`).

PI builds this module with protoc; the `p4runtime` package on PyPI does not ship it. This is
hotplane's own: the message is made from its descriptor (as in
crates/p4rt/proto/p4/tmp/p4config.proto, checked wire-equal by crates/p4rt/tests/wire.rs), so it
needs no protoc and works with protobuf 3.20 and later. The test command copies it into the
clients' virtual environments.
"""

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.internal import builder as _builder

_F = descriptor_pb2.FieldDescriptorProto


def _field(message, name, number, kind, label=_F.LABEL_OPTIONAL, type_name=None, json_name=None):
    f = message.field.add(name=name, number=number, type=kind, label=label, json_name=json_name or name)
    if type_name:
        f.type_name = type_name


def _file():
    f = descriptor_pb2.FileDescriptorProto(
        name="p4/tmp/p4config.proto", package="p4.tmp", syntax="proto3"
    )
    config = f.message_type.add(name="P4DeviceConfig")
    extras = config.nested_type.add(name="Extras")
    kv = extras.nested_type.add(name="KvEntry")
    kv.options.map_entry = True
    _field(kv, "key", 1, _F.TYPE_STRING)
    _field(kv, "value", 2, _F.TYPE_STRING)
    _field(extras, "kv", 1, _F.TYPE_MESSAGE, _F.LABEL_REPEATED, ".p4.tmp.P4DeviceConfig.Extras.KvEntry")
    _field(config, "reassign", 1, _F.TYPE_BOOL)
    _field(config, "extras", 2, _F.TYPE_MESSAGE, type_name=".p4.tmp.P4DeviceConfig.Extras")
    _field(config, "device_data", 3, _F.TYPE_BYTES, json_name="deviceData")
    return f


DESCRIPTOR = descriptor_pool.Default().AddSerializedFile(_file().SerializeToString())
_builder.BuildMessageAndEnumDescriptors(DESCRIPTOR, globals())
_builder.BuildTopDescriptorsAndMessages(DESCRIPTOR, "p4.tmp.p4config_pb2", globals())
