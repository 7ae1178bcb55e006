"""`kcoord scram`: SCRAM credentials for a server that is not running, in the syntax of
`kafka-storage.sh format --add-scram` (the way a KRaft cluster gets its first SCRAM users before
anyone can authenticate to add more):

    kcoord scram [server.properties] [--override name=value ...] \\
        --add-scram 'SCRAM-SHA-256=[name=admin,password=admin-secret]' \\
        --add-scram 'SCRAM-SHA-512=[name=alice,password=alice-secret,iterations=8192]' \\
        [--delete-scram 'SCRAM-SHA-256=[name=bob]'] [--list]

The credentials go into the log directory the configuration names, through the same store and
records the server's AlterUserScramCredentials uses; the server's log-directory lock is held
meanwhile, so this refuses to run beside a live server (use AlterUserScramCredentials then:
kafka-configs.sh --alter --add-config 'SCRAM-SHA-256=[password=...]' --entity-type users).
"""
from __future__ import annotations

import argparse
import fcntl
import os
import re
import sys

from kcoord.server.config import Config
from kcoord.server.security.credentials import CredentialStore, upsert_record
from kcoord.server.security.scram import MAX_ITERATIONS, ScramMechanism, credential_from_password

_SPEC = re.compile(r"^\s*(SCRAM-SHA-(?:256|512))\s*=\s*\[(.*)\]\s*$")


def parse_scram(spec: str) -> tuple[ScramMechanism, dict[str, str]]:
    """`SCRAM-SHA-256=[name=alice,password=secret,iterations=8192]`."""
    m = _SPEC.match(spec)
    if m is None:
        raise ValueError(f"expected MECHANISM=[name=...,password=...], e.g. SCRAM-SHA-256=[name=alice,password=x]; "
                         f"got {spec.split('=', 1)[0]}=[...]")
    fields: dict[str, str] = {}
    for item in m.group(2).split(","):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"{m.group(1)}: {key.strip()!r} is not key=value")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        fields[key.strip().lower()] = value
    if not fields.get("name"):
        raise ValueError(f"{m.group(1)}: a name is needed")
    return ScramMechanism.from_name(m.group(1)), fields


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="kcoord scram", description="SCRAM credentials of a stopped server")
    ap.add_argument("config", nargs="?", help="server.properties or .toml file")
    ap.add_argument("--override", action="append", metavar="NAME=VALUE", default=[])
    ap.add_argument("--add-scram", action="append", default=[], metavar="MECH=[name=..,password=..]")
    ap.add_argument("--delete-scram", action="append", default=[], metavar="MECH=[name=..]")
    ap.add_argument("--list", action="store_true", help="print user, mechanism and iterations")
    args = ap.parse_args(argv)
    try:
        config = Config.load(args.config, args.override)
        adds = [parse_scram(s) for s in args.add_scram]
        deletes = [parse_scram(s) for s in args.delete_scram]
    except (OSError, ValueError) as e:
        print(f"kcoord scram: {e}", file=sys.stderr)
        return 2
    log_dir = config.log_dir
    log_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(log_dir / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            print(f"kcoord scram: a server is using {log_dir}; change credentials through it "
                  "(AlterUserScramCredentials, e.g. kafka-configs.sh --entity-type users)", file=sys.stderr)
            return 1
        store = CredentialStore(log_dir)
        store.load()
        records = []
        for mech, f in deletes:
            if (f["name"], mech) not in store.state:
                print(f"kcoord scram: no {mech.mechanism_name} credential for {f['name']}", file=sys.stderr)
                return 1
            records.append({"type": "RemoveUserScramCredentialRecord", "name": f["name"], "mechanism": int(mech)})
        for mech, f in adds:
            if "password" not in f:
                print(f"kcoord scram: {mech.mechanism_name} for {f['name']} needs a password", file=sys.stderr)
                return 2
            iterations = int(f.get("iterations", 4096))
            if not mech.min_iterations <= iterations <= MAX_ITERATIONS:
                print(f"kcoord scram: iterations must be {mech.min_iterations}..{MAX_ITERATIONS}", file=sys.stderr)
                return 2
            records.append(upsert_record(f["name"], mech, credential_from_password(mech, f["password"], iterations)))
        store.commit_now(records)
        if args.list:
            for (name, mech), cred in sorted(store.state.items()):
                print(f"{name}\t{mech.mechanism_name}\titerations={cred.iterations}")
        return 0
    finally:
        os.close(fd)
