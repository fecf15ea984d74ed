#!/usr/bin/python3
"""A real gRPC client (grpcio, Debian's python3-grpcio: gRPC's C core) against
examples/grpc-echo on 127.0.0.1:PORT over h2c: a unary call, a server-streaming call, and a
method the service lacks. Messages are encoded by hand (raw bytes in and out), so no generated
code is needed. Prints one line per result; exit status 127 when grpcio is not installed.

Usage: tests/grpc/client.py PORT
"""
import sys

try:
    import grpc
except ImportError:
    sys.exit(127)


def varint(value):
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def request(text, count=None):
    data = text.encode()
    message = b"\x0a" + varint(len(data)) + data
    if count is not None:
        message += b"\x10" + varint(count)
    return message


def reply(message):
    """EchoReply's fields: (text, index)."""
    text, index, pos = "", 0, 0
    while pos < len(message):
        key = message[pos]
        pos += 1
        if key == 0x0A:
            length = message[pos]
            pos += 1
            text = message[pos:pos + length].decode()
            pos += length
        elif key == 0x10:
            index = message[pos]
            pos += 1
        else:
            raise ValueError("unexpected field %r" % key)
    return text, index


def main():
    port = sys.argv[1]
    identity = lambda b: b
    with grpc.insecure_channel("127.0.0.1:" + port) as channel:
        say = channel.unary_unary("/echo.Echo/Say", request_serializer=identity, response_deserializer=identity)
        print("say", reply(say(request("hello over h2c"), timeout=10))[0])
        repeat = channel.unary_stream("/echo.Echo/Repeat", request_serializer=identity, response_deserializer=identity)
        for message in repeat(request("tick", 3), timeout=10):
            text, index = reply(message)
            print("repeat", index, text)
        missing = channel.unary_unary("/echo.Echo/Missing", request_serializer=identity, response_deserializer=identity)
        try:
            missing(request("x"), timeout=10)
            print("missing answered")
        except grpc.RpcError as err:
            print("missing", err.code().name, err.details())


if __name__ == "__main__":
    main()
