#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets (Corpus/<target>/): a few valid inputs of each
decoder, so that libFuzzer starts from the formats instead of from nothing. Run from Fuzz/."""
import struct


def w(path, b):
    with open(path, "wb") as f:
        f.write(b)


# FileJobFuzzer: job files (JSON) and job file names.
w("Corpus/FileJobFuzzer/job.json", b'{"id":"job-1","createdDate":786297600.5,"data":"aGVsbG8=","action":"upload"}')
w("Corpus/FileJobFuzzer/no-data.json", b'{"id":"j\\u00e9","createdDate":0,"action":""}')
w("Corpus/FileJobFuzzer/undecodable.json", b'{"id":"job-2","createdDate":"yesterday"}')
w("Corpus/FileJobFuzzer/name.job", b"00000000000000000007-job_2F1.job")
w("Corpus/FileJobFuzzer/hashed-name.job", b"00000000000000000012-=0123456789abcdef.job")


# BinaryRowFuzzer: BinaryJobCoder's format (see BinaryJobCoder.swift).
def varint(n):
    out = b""
    while n >= 0x80:
        out += bytes([(n & 0x7F) | 0x80])
        n >>= 7
    return out + bytes([n])


def s(t):
    b = t.encode()
    return bytes([6]) + varint(len(b)) + b


def key(k):
    b = k.encode()
    return varint(len(b)) + b


def m(pairs):
    return bytes([10]) + varint(len(pairs)) + b"".join(key(k) + v for k, v in pairs)


def date(x):
    return bytes([8]) + struct.pack("<d", x)


def data(b):
    return bytes([7]) + varint(len(b)) + b


def i(n):
    return bytes([3]) + varint(((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF)


def u(n):
    return bytes([4]) + varint(n)


def dbl(x):
    return bytes([5]) + struct.pack("<d", x)


def arr(xs):
    return bytes([9]) + varint(len(xs)) + b"".join(xs)


w("Corpus/BinaryRowFuzzer/cutejob",
  b"\xb1" + m([("id", s("job-1")), ("createdDate", date(786297600.5)), ("data", data(b"hello")), ("action", s("upload"))]))
w("Corpus/BinaryRowFuzzer/cutejob-nodata", b"\xb1" + m([("id", s("job-2")), ("createdDate", date(0)), ("action", s(""))]))
child = m([("small", i(1)), ("wide", u(1)), ("ratio", dbl(1)), ("kind", s("two")), ("when", date(2)),
           ("blob", data(b"")), ("list", arr([])), ("table", m([]))])
rich = m([("small", i(-5)), ("unsigned", u(7)), ("wide", u(2**63)), ("ratio", dbl(0.5)), ("kind", s("one")),
          ("when", date(1.0)), ("blob", data(b"\x00\x01")), ("list", arr([i(1), i(-2)])),
          ("table", m([("a", arr([u(1), u(255)]))])), ("children", arr([child])), ("pair", arr([i(3), s("x")]))])
w("Corpus/BinaryRowFuzzer/rich", b"\xb1" + rich)


# TaskRowFuzzer: thirteen columns, each a type byte (0 null, 1 integer, 2 real, 3 text, 4 blob),
# a length byte and the content (integers and reals big-endian).
def col(kind, content=b""):
    return bytes([kind, len(content)]) + content


def be(n):
    return struct.pack(">q", n)


def real(x):
    return col(2, struct.pack(">d", x))


# not_before, priority, last_failure, failed_at: none, 0, none, none.
plain = col(0) + col(1, be(0)) + col(0) + col(0)
payload = b'{"key":"k1","collection":"c","queueName":"q-1","step":1}'
w("Corpus/TaskRowFuzzer/ready", col(3, b"k1") + col(3, b"c") + col(3, b"q-1") + col(4, payload)
  + col(1, be(1)) + col(1, be(1)) + col(1, be(0)) + col(1, be(0)) + col(0) + plain)
w("Corpus/TaskRowFuzzer/paused-until", col(3, b"k2") + col(3, b"c") + col(3, b"q-1") + col(4, payload)
  + col(1, be(2)) + col(1, be(5)) + col(1, be(3)) + col(1, be(1)) + real(1.7e9)
  + col(0) + col(1, be(0)) + col(3, b"the handler asked to retry after 5.0 seconds") + real(1.7e9))
w("Corpus/TaskRowFuzzer/paused-until-restart", col(3, b"k3") + col(3, b"c") + col(3, b"q-2") + col(3, b"not json")
  + col(1, be(3)) + col(1, be(6)) + col(1, be(0)) + col(1, be(2)) + col(0) + plain)
w("Corpus/TaskRowFuzzer/later-with-priority", col(3, b"k4") + col(3, b"c") + col(3, b"q-3") + col(4, payload)
  + col(1, be(4)) + col(1, be(7)) + col(1, be(0)) + col(1, be(0)) + col(0)
  + real(1.9e9) + col(1, be(-5)) + col(0) + col(0))

# QueuekitArgumentsFuzzer: the arguments, separated by NUL bytes.
for name, args in [
    ("work", ["work", "--database", "sqlite:/tmp/q.sqlite", "--work-ms", "2.5", "--max-attempts", "3",
              "--backoff-ms", "10", "--max-backoff-ms", "100", "--concurrency", "4"]),
    ("demo", ["demo", "--actions", "100", "--users", "3", "--seed", "7", "--transient-rate", "0.1",
              "--permanent-rate", "0.01", "--fresh"]),
    ("enqueue", ["enqueue", "--queue", "user-1", "--count", "3", "--fail-times", "1", "--key-prefix", "p"]),
    ("list", ["list", "--queue", "deadletter-user-1", "--dead-letter", "--limit", "0"]),
    ("retry", ["retry", "uploads-user-1", "--simulate-fix"]),
    ("stats", ["stats", "--database", "sqlite:"]),
    ("purge", ["purge", "--help"]),
    ("stats-postgres", ["stats", "--database", "postgres://app:secret@127.0.0.1:5432/app?schema=qk&lease=2.5"]),
    ("demo-cluster", ["demo-cluster", "--database", "postgresql://u@h/d", "--workers", "3", "--kill-at", "0.5",
                      "--actions", "100"]),
    ("work-trace", ["work", "--database", "postgres://u@h:1/d?sslmode=disable", "--trace-file", "/dev/null"]),
]:
    w("Corpus/QueuekitArgumentsFuzzer/" + name, b"\0".join(a.encode() for a in args))
