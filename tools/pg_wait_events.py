#!/usr/bin/env python3
"""Writes src/appwait/pg_events.rs: PostgreSQL's wait event, lock, LWLock and
backend type names by number, for each major version, read from PostgreSQL's
own source trees (the numbers are enum positions, so only the sources say them).

    tools/pg_wait_events.py postgresql-14.x postgresql-15.x ... > src/appwait/pg_events.rs

Each argument is an unpacked release tarball (ftp.postgresql.org, or a
distribution's .orig.tar); for 12 the whole tree, as its tranche names are
spread across the backend. The newest minor release of a major is the one to
use: minor releases only ever append events (PostgreSQL keeps them ABI stable).
"""

import glob
import re
import sys

# Class byte -> (PostgreSQL's class name, the enum typedef of its events).
CLASSES = [
    (0x05, "Activity", "WaitEventActivity"),
    (0x06, "Client", "WaitEventClient"),
    (0x08, "IPC", "WaitEventIPC"),
    (0x09, "Timeout", "WaitEventTimeout"),
    (0x0A, "IO", "WaitEventIO"),
]


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def enum_members(text, typedef):
    """Members of `typedef enum [tag] { ... } typedef;`, in order."""
    m = re.search(r"typedef\s+enum\s*\w*\s*\{([^}]*)\}\s*" + typedef + r"\s*;", strip_comments(text))
    if not m:
        raise SystemExit(f"enum {typedef} not found")
    members = []
    for item in m.group(1).split(","):
        item = item.strip()
        if item:
            members.append(item.split("=")[0].strip())
    return members


def switch_names(text, var):
    """`case X: var = "name";` pairs of a name function."""
    return dict(re.findall(r"case\s+(\w+)\s*:\s*" + var + r'\s*=\s*"([^"]*)"', strip_comments(text)))


def version_of(src):
    m = re.search(r"PACKAGE_VERSION='(\d+)\.(\d+)'", read(f"{src}/configure"))
    return int(m.group(1)), f"{m.group(1)}.{m.group(2)}"


def events_v17(src):
    """Version 17 generates its enums from wait_event_names.txt: per class,
    events sorted by name, then the ABI_compatibility ones in file order."""
    sections, section, abi = {}, None, False
    for line in read(f"{src}/src/backend/utils/activity/wait_event_names.txt").splitlines():
        if line.startswith("#") or not line.strip():
            continue
        m = re.match(r"Section: ClassName - (\w+)", line)
        if m:
            section, abi = m.group(1), False
            sections.setdefault(section, ([], []))
            continue
        if line.strip() == "ABI_compatibility:":
            abi = True
            continue
        name = line.split("\t")[0]
        sections[section][1 if abi else 0].append(name)
    out = {}
    for cls, (plain, compat) in sections.items():
        names = sorted(plain, key=str.upper) + compat
        if cls not in ("WaitEventLWLock", "WaitEventLock"):
            names = ["".join(p[:1] + p[1:].lower() for p in n.split("_")) for n in names]
        out[cls] = names
    return out


def events_before_17(src, major):
    if major >= 14:
        header = read(f"{src}/src/include/utils/wait_event.h")
        names = switch_names(read(f"{src}/src/backend/utils/activity/wait_event.c"), "event_name")
    else:
        header = read(f"{src}/src/include/pgstat.h")
        names = switch_names(read(f"{src}/src/backend/postmaster/pgstat.c"), "event_name")
    out = {}
    for _, _, typedef in CLASSES:
        out[typedef] = [names[m] for m in enum_members(header, typedef)]
    return out


def lwlocks(src, major):
    """Tranche names by tranche id: the individual locks, then built-in tranches."""
    ids = {}
    if major >= 17:
        for i, name in re.findall(r"PG_LWLOCK\((\d+),\s*(\w+)\)", read(f"{src}/src/include/storage/lwlocklist.h")):
            ids[int(i)] = name
    else:
        for line in read(f"{src}/src/backend/storage/lmgr/lwlocknames.txt").splitlines():
            m = re.match(r"(\w+)\s+(\d+)\s*$", line)
            if m:
                # 13 dropped the suffix from the names it shows.
                ids[int(m.group(2))] = m.group(1) if major < 13 else re.sub(r"Lock$", "", m.group(1))
    individual = max(ids) + 1
    tranches = enum_members(read(f"{src}/src/include/storage/lwlock.h"), "BuiltinTrancheIds")
    assert tranches[-1] == "LWTRANCHE_FIRST_USER_DEFINED"
    if major < 13:
        return [ids.get(i, "") for i in range(individual)] + registered_tranches(src, tranches[:-1])
    body = read(f"{src}/src/backend/storage/lmgr/lwlock.c")
    body = strip_comments(re.search(r"BuiltinTrancheNames\[\]\s*=\s*\{(.*?)\};", body, re.S).group(1))
    designated = dict(re.findall(r"\[(LWTRANCHE_\w+)\]\s*=\s*\"([^\"]*)\"", body))
    if designated:
        names = [designated[t] for t in tranches[:-1]]
    else:
        names = re.findall(r"\"([^\"]*)\"", body)
    assert len(names) == len(tranches) - 1, (len(names), len(tranches))
    table = [ids.get(i, "") for i in range(individual)] + names
    return table


def registered_tranches(src, tranches):
    """Version 12 names its built-in tranches where each is set up, at run
    time: LWLockRegisterTranche(id, "name") and SimpleLruInit(ctl, "name",
    ..., id) calls across the backend (the full source tree is needed)."""
    found = {}
    for path in sorted(glob.glob(f"{src}/src/backend/**/*.c", recursive=True)):
        text = strip_comments(read(path))
        for lvalue, name in re.findall(r'LWLockRegisterTranche\(\s*([\w>-]+)\s*,\s*"([^"]+)"', text):
            if not lvalue.startswith("LWTRANCHE_"):
                # An id kept in a struct first: `x->tranche_id = LWTRANCHE_Y;`
                m = re.search(re.escape(lvalue) + r"\s*=\s*(LWTRANCHE_\w+)", text)
                lvalue = m.group(1) if m else lvalue
            found.setdefault(lvalue, name)
        for name, lvalue in re.findall(r'SimpleLruInit\(\s*\w+\s*,\s*"([^"]+)"[^;]*?(LWTRANCHE_\w+)\s*\)\s*;', text, re.S):
            found.setdefault(lvalue, name)
    missing = [t for t in tranches if t not in found]
    assert not missing, f"no name found for {missing}"
    return [found[t] for t in tranches]


def locks(src):
    body = read(f"{src}/src/backend/utils/adt/lockfuncs.c")
    body = re.search(r"LockTagTypeNames\[\]\s*=\s*\{(.*?)\};", body, re.S).group(1)
    names = re.findall(r"\"([^\"]*)\"", strip_comments(body))
    assert len(names) == len(enum_members(read(f"{src}/src/include/storage/lock.h"), "LockTagType"))
    return names


def backend_types(src, major):
    if major < 13:
        # 12 keeps it only in shared memory: no MyBackendType to read.
        return []
    members = enum_members(read(f"{src}/src/include/miscadmin.h"), "BackendType")
    names = switch_names(read(f"{src}/src/backend/utils/init/miscinit.c"), "backendDesc")
    return [names.get(m, "") for m in members]


def rust_list(names):
    return "&[" + ", ".join('"' + n.replace('"', '\\"') + '"' for n in names) + "]"


def main(srcs):
    versions = []
    for src in srcs:
        major, full = version_of(src)
        ev = events_v17(src) if major >= 17 else events_before_17(src, major)
        versions.append((major, full, ev, lwlocks(src, major), locks(src), backend_types(src, major)))
    versions.sort()
    print("// Generated by tools/pg_wait_events.py from PostgreSQL " + ", ".join(v[1] for v in versions) + ";")
    print("// do not edit. Names by number (enum position within each class).")
    print()
    print("use super::pg::Tables;")
    print()
    print("#[rustfmt::skip]")
    print("pub static TABLES: &[Tables] = &[")
    for major, full, ev, lw, lk, bt in versions:
        print("    Tables {")
        print(f"        major: {major},")
        for _, _, typedef in CLASSES:
            field = typedef.removeprefix("WaitEvent").lower()
            print(f"        {field}: {rust_list(ev[typedef])},")
        print(f"        lwlock: {rust_list(lw)},")
        print(f"        lock: {rust_list(lk)},")
        print(f"        backend_type: {rust_list(bt)},")
        print("    },")
    print("];")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    main(sys.argv[1:])
