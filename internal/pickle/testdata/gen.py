#!/usr/bin/env python3
"""Generate the differential-test fixtures for internal/pickle (stdlib only).

Writes random_p{0..5}.bin (each a sequence of records: 4-byte little-endian
length + one pickle of the value) and random_expected.json (the canonical
rendering of every value, in the same order). Run from this directory:

    python3 gen.py

Canonical rendering: None -> null, bool -> true/false, int -> {"i": "123"},
float -> {"f": "<16 hex digits of the IEEE bits>"}, str -> {"s": ...},
bytes -> {"b": "<hex>"}, list -> {"l": [...]}, tuple -> {"t": [...]},
dict and OrderedDict -> {"d": [[k, v], ...]}, set -> {"set": [...]},
frozenset -> {"fs": [...]} (sets in iteration order, which is the order
pickle writes them).
"""
import collections
import json
import pickle
import random
import struct

N = 150
rng = random.Random(20261122)


def rand_str():
    n = rng.choice([0, 1, 3, 8, 20, 300 if rng.random() < 0.1 else 5])
    alphabet = "abc xyz_\n\t\\'\"é中😀\x00\x7f"
    return "".join(rng.choice(alphabet) for _ in range(n))


def rand_int():
    k = rng.randrange(8)
    if k == 0:
        return rng.randrange(256)
    if k == 1:
        return rng.randrange(-(2**31), 2**31)
    if k == 2:
        return rng.randrange(2**47, 2**51)  # addresses, timestamps
    if k == 3:
        return rng.randrange(-(2**63), 2**64)
    if k == 4:
        return rng.choice([2**63, 2**64 - 1, -(2**63) - 1, 2**200 + 7, -(2**100)])
    if k == 5:
        return rng.choice([0, -1, 255, 256, 65535, 65536, -129, 127, 128])
    return rng.randrange(-1000, 1000)


def rand_float():
    return rng.choice([0.0, -0.0, 1.5, 1e300, -2.5e-300, float("inf"), float("-inf"),
                       rng.random() * 1e6, 1.0 / 3])


def rand_scalar():
    k = rng.randrange(7)
    return [None, True, False][rng.randrange(3)] if k == 0 else (
        rand_int() if k in (1, 2) else rand_float() if k == 3 else
        rand_str() if k in (4, 5) else bytes(rng.randrange(256) for _ in range(rng.choice([0, 1, 5, 260]))))


def rand_hashable():
    k = rng.randrange(3)
    if k == 0:
        return rand_int()
    if k == 1:
        return rand_str()
    return (rand_int(), rand_str())


def rand_value(depth, shared):
    if depth <= 0 or rng.random() < 0.3:
        if shared and rng.random() < 0.2:
            return rng.choice(shared)
        return rand_scalar()
    k = rng.randrange(9)
    n = rng.choice([0, 1, 2, 3, 5])
    if k == 8:
        # A long flat list: crosses the 1000-item APPENDS batches.
        return [rand_int() for _ in range(1001 + rng.randrange(3))]
    if k in (0, 1):
        v = [rand_value(depth - 1, shared) for _ in range(n)]
        if rng.random() < 0.5:
            shared.append(v)
        return v
    if k == 2:
        return tuple(rand_value(depth - 1, shared) for _ in range(min(n, 6)))
    if k in (3, 4):
        v = {rand_hashable(): rand_value(depth - 1, shared) for _ in range(n)}
        if rng.random() < 0.5:
            shared.append(v)
        return v
    if k == 5:
        return collections.OrderedDict((rand_str(), rand_value(depth - 1, shared)) for _ in range(min(n, 4)))
    if k == 6:
        return set(rand_hashable() for _ in range(min(n, 8)))
    return frozenset(rand_int() for _ in range(min(n, 8)))


def canon(v):
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, int):
        return {"i": str(v)}
    if isinstance(v, float):
        return {"f": struct.pack(">d", v).hex()}
    if isinstance(v, str):
        return {"s": v}
    if isinstance(v, bytes):
        return {"b": v.hex()}
    if isinstance(v, list):
        return {"l": [canon(x) for x in v]}
    if isinstance(v, tuple):
        return {"t": [canon(x) for x in v]}
    if isinstance(v, dict):
        return {"d": [[canon(k), canon(x)] for k, x in v.items()]}
    if isinstance(v, set):
        return {"set": [canon(x) for x in v]}
    if isinstance(v, frozenset):
        return {"fs": [canon(x) for x in v]}
    raise TypeError(type(v))


def main():
    values = []
    for i in range(N):
        shared = []
        v = rand_value(rng.randrange(1, 4), shared)
        # Make sure sharing happens: reference an earlier container again.
        if shared and isinstance(v, list) and shared[0] is not v:
            v.append(shared[0])
        values.append(v)
    # Hand-picked cases first-class in the fixtures.
    s = [1, 2]
    values.append([s, s, {"k": s}])
    values.append(collections.OrderedDict([("a", 1), ("b", [s, s])]))
    values.append({"frames": [{"filename": "f.py", "line": 3, "name": "g"}] * 3})
    for p in range(6):
        with open(f"random_p{p}.bin", "wb") as f:
            for v in values:
                data = pickle.dumps(v, protocol=p)
                f.write(struct.pack("<I", len(data)))
                f.write(data)
    with open("random_expected.json", "w") as f:
        json.dump([canon(v) for v in values], f, ensure_ascii=False, allow_nan=False)
        f.write("\n")


if __name__ == "__main__":
    main()
