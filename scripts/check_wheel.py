#!/usr/bin/env python3
"""Checks gpumem wheels as an installer reads them, independently of the Go
code that wrote them: CRCs, RECORD (every member with its urlsafe-base64
sha256 and size, RECORD's own line empty), WHEEL, METADATA, the
executable bit of the binary in .data/scripts/, and the Python module
(gpumem/__init__.py, and gpumem/_version.py naming the wheel's version).

usage: python3 scripts/check_wheel.py WHEEL...
"""
import base64
import csv
import email.parser
import hashlib
import io
import os
import sys
import zipfile


def check(path):
    base = os.path.basename(path)
    name, version, py, abi, plat = base[: -len(".whl")].split("-")
    info = f"{name}-{version}.dist-info"
    with zipfile.ZipFile(path) as zf:
        bad = zf.testzip()
        if bad is not None:
            return f"{bad}: bad CRC"
        members = {i.filename: i for i in zf.infolist()}
        rows = list(csv.reader(io.StringIO(zf.read(f"{info}/RECORD").decode())))
        listed = {r[0]: r[1:] for r in rows}
        if set(listed) != set(members):
            return f"RECORD lists {sorted(listed)}, the wheel holds {sorted(members)}"
        if listed[f"{info}/RECORD"] != ["", ""]:
            return f"RECORD's own line is {listed[info + '/RECORD']}, want it empty"
        for member, (digest, size) in listed.items():
            if member == f"{info}/RECORD":
                continue
            data = zf.read(member)
            want = "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            if digest != want or size != str(len(data)):
                return f"{member}: RECORD has {digest},{size}; the member is {want},{len(data)}"
        wheel = email.parser.Parser().parsestr(zf.read(f"{info}/WHEEL").decode())
        if wheel["Wheel-Version"] != "1.0" or wheel["Root-Is-Purelib"] != "false":
            return f"WHEEL: {dict(wheel)}"
        if wheel.get_all("Tag") != [f"{py}-{abi}-{plat}"]:
            return f"WHEEL tags {wheel.get_all('Tag')} do not match the file name"
        meta = email.parser.Parser().parsestr(zf.read(f"{info}/METADATA").decode())
        for key in ("Metadata-Version", "Summary", "Requires-Python", "License-Expression", "Project-URL"):
            if not meta[key]:
                return f"METADATA has no {key}"
        if (meta["Name"], meta["Version"]) != (name, version):
            return f"METADATA names {meta['Name']} {meta['Version']}, the file name {name} {version}"
        scripts = [m for m in members if m.startswith(f"{name}-{version}.data/scripts/")]
        if len(scripts) != 1:
            return f"want one binary in .data/scripts/, have {scripts}"
        mode = members[scripts[0]].external_attr >> 16
        if mode & 0o111 != 0o111:
            return f"{scripts[0]}: mode {oct(mode)} is not executable"
        for mod in ("gpumem/__init__.py", "gpumem/_version.py"):
            if mod not in members:
                return f"no {mod}: import gpumem would fail"
        v = zf.read("gpumem/_version.py").decode()
        if f'\nversion = "{version}"\n' not in v:
            return f"gpumem/_version.py does not say version {version}: {v!r}"
        try:
            compile(zf.read("gpumem/__init__.py"), "gpumem/__init__.py", "exec")
        except SyntaxError as e:
            return f"gpumem/__init__.py: {e}"
        return None


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    failed = False
    for path in sys.argv[1:]:
        err = check(path)
        if err:
            print(f"{path}: {err}", file=sys.stderr)
            failed = True
        else:
            print(f"ok {path}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
