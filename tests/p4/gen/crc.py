"""A bitwise CRC-16/ARC (BMv2's `crc16`), checked against its published check value: the
reference the generators compute hash positions with, independently of hotplane."""


def crc16_arc(data: bytes) -> int:
    crc = 0
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc


assert crc16_arc(b"123456789") == 0xBB3D
