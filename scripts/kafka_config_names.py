#!/usr/bin/env python3
"""Regenerate server/kafka_broker_config_names.txt: every broker config name Apache Kafka
defines, read from a Kafka git repository's sources (no Kafka build needed).

    python scripts/kafka_config_names.py /path/to/kafka/.git 3.9 trunk > server/kafka_broker_config_names.txt

For each ref: the ConfigDefs AbstractKafkaConfig.CONFIG_DEF merges (ServerConfigs,
KRaftConfigs, ZkConfigs, SocketServerConfigs, ReplicationConfigs, GroupCoordinatorConfig,
CleanerConfig, LogConfig.SERVER_CONFIG_DEF, TransactionLogConfigs, QuorumConfig, MetricConfigs,
QuotaConfigs, BrokerSecurityConfigs, RemoteLogManagerConfig, ...), every define() and
defineInternal() in them, with each name's constant resolved through the Java sources (string
literals, concatenations, constants of other classes, static imports); plus the broker quota
configs DynamicConfig.Broker adds (QuotaConfigs' broker quota names). The output is the union
of the refs, sorted, one name a line, with a header naming the refs.
"""
from __future__ import annotations

import re
import subprocess
import sys

_CONST = re.compile(r"\bString\s+([A-Za-z_][A-Za-z0-9_]*)\s*=\s*", re.S)
_IMPORT_STATIC = re.compile(r"^import\s+static\s+([\w.]+)\.(\w+|\*)\s*;", re.M)
_LIST_ENTRY = re.compile(r"\b([A-Z]\w*)\.(\w+)(\(\))?")
_SERVER_SYNONYM = re.compile(r"(?:ServerTopicConfigSynonyms\.)?serverSynonym\((.+)\)", re.S)
_SYNONYM_ENTRY = re.compile(r"\b(sameName|single|list)(|WithLogPrefix|WithLogCleanerPrefix)\(\s*([\w.]+)\s*"
                            r"(?:,([^\n]*(?:\n\s*new ConfigSynonym[^\n]*)*))?\)")


def _git(gitdir: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", gitdir, *args], capture_output=True, text=True, check=True).stdout


def _scan_to(text: str, start: int, stop: str) -> int:
    """Index of the first `stop` character at nesting depth 0 from `start`, skipping strings."""
    depth, i, n = 0, start, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c == "'":
            i += 1
            while i < n and text[i] != "'":
                i += 2 if text[i] == "\\" else 1
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0 and c in stop:
                return i
            depth -= 1
        elif depth == 0 and c in stop:
            return i
        i += 1
    return n


class Sources:
    def __init__(self, gitdir: str, ref: str) -> None:
        self.gitdir, self.ref = gitdir, ref
        files = _git(gitdir, "ls-tree", "-r", "--name-only", ref).splitlines()
        self.paths: dict[str, list[str]] = {}
        for p in files:
            if p.endswith(".java") and "/src/main/java/" in p:
                self.paths.setdefault(p.rsplit("/", 1)[1][:-5], []).append(p)
        self._text: dict[str, str] = {}
        self._consts: dict[str, dict[str, str]] = {}

    def text(self, cls: str) -> str:
        if cls not in self._text:
            self._text[cls] = "\n".join(_git(self.gitdir, "show", f"{self.ref}:{p}") for p in self.paths.get(cls, []))
        return self._text[cls]

    def consts(self, cls: str) -> dict[str, str]:
        if cls not in self._consts:
            text, out = self.text(cls), {}
            for m in _CONST.finditer(text):
                end = _scan_to(text, m.end(), ";,")
                out.setdefault(m.group(1), text[m.end():end].strip())
            self._consts[cls] = out
        return self._consts[cls]

    def resolve(self, expr: str, cls: str, depth: int = 0) -> str | None:
        """The string value of a constant expression written in class `cls`."""
        if depth > 20:
            return None
        parts, out = _split_plus(expr), []
        for part in parts:
            part = part.strip()
            if part.startswith('"') and part.endswith('"'):
                out.append(bytes(part[1:-1], "utf-8").decode("unicode_escape"))
                continue
            synonym = _SERVER_SYNONYM.fullmatch(part)
            if synonym is not None:  # ServerTopicConfigSynonyms.serverSynonym(TopicConfig.X)
                topic = self.resolve(synonym.group(1), cls, depth + 1)
                value = self.synonyms().get(topic) if topic is not None else None
            else:
                value = self._name(part, cls, depth)
            if value is None:
                return None
            out.append(value)
        return "".join(out)

    def synonyms(self) -> dict[str, str]:
        """ServerTopicConfigSynonyms: topic config name -> its first broker synonym."""
        if not hasattr(self, "_synonyms"):
            cls, out = "ServerTopicConfigSynonyms", {}
            prefix = {"": "", "WithLogPrefix": "log.", "WithLogCleanerPrefix": "log.cleaner."}
            for m in _SYNONYM_ENTRY.finditer(self.text(cls)):
                kind, how, topic_expr, rest = m.group(1), m.group(2), m.group(3), m.group(4)
                topic = self.resolve(topic_expr, cls)
                if topic is None:
                    continue
                if kind == "sameName":
                    out[topic] = prefix[how] + topic
                else:  # single / list: the first broker name given
                    first = re.search(r'"([^"]+)"', rest or "")
                    if first:
                        out[topic] = prefix[how] + first.group(1)
            self._synonyms = out
        return self._synonyms

    def _name(self, ref: str, cls: str, depth: int) -> str | None:
        if "." in ref:
            owner, name = ref.rsplit(".", 1)
            owner = owner.rsplit(".", 1)[-1]
            expr = self.consts(owner).get(name)
            return None if expr is None else self.resolve(expr, owner, depth + 1)
        expr = self.consts(cls).get(ref)
        if expr is not None:
            return self.resolve(expr, cls, depth + 1)
        for m in _IMPORT_STATIC.finditer(self.text(cls)):
            owner, member = m.group(1).rsplit(".", 1)[-1], m.group(2)
            if member in (ref, "*") and ref in self.consts(owner):
                return self.resolve(self.consts(owner)[ref], owner, depth + 1)
        return None


def _split_plus(expr: str) -> list[str]:
    parts, start, i = [], 0, 0
    while True:
        j = _scan_to(expr, i, "+")
        parts.append(expr[start:j])
        if j >= len(expr):
            return parts
        start = i = j + 1


def _defined_names(src: Sources, cls: str, body: str) -> set[str]:
    names = set()
    for m in re.finditer(r"\.define(?:Internal)?\(", body):
        end = _scan_to(body, m.end(), ",)")
        name = src.resolve(body[m.end():end], cls)
        if name is None:
            print(f"# {src.ref}: cannot resolve {body[m.end():end].strip()!r} in {cls}", file=sys.stderr)
        else:
            names.add(name)
    return names


def _initializer(text: str, member: str, method: bool) -> str:
    if method:
        m = re.search(rf"\b{member}\s*\(\s*\)\s*\{{", text)
        return text[m.end():_scan_to(text, m.end(), "}")] if m else ""
    m = re.search(rf"\b{member}\s*=(?!=)", text)
    return text[m.end():_scan_to(text, m.end(), ";")] if m else ""


def broker_config_names(gitdir: str, ref: str) -> set[str]:
    src = Sources(gitdir, ref)
    merged = src.text("AbstractKafkaConfig")
    m = re.search(r"CONFIG_DEF\s*=\s*Utils\.mergeConfigs\(", merged)
    if m is None:
        raise SystemExit(f"{ref}: AbstractKafkaConfig.CONFIG_DEF not found")
    entries = merged[m.end():_scan_to(merged, m.end(), ";")]
    names: set[str] = set()
    for e in _LIST_ENTRY.finditer(entries):
        cls, member, call = e.group(1), e.group(2), e.group(3)
        if cls in ("Arrays", "List", "Utils"):
            continue
        body = _initializer(src.text(cls), member, bool(call))
        found = _defined_names(src, cls, body)
        if not found:
            print(f"# {ref}: nothing defined by {cls}.{member}", file=sys.stderr)
        names |= found
    # DynamicConfig.Broker: the replication throttles and log-dir copy quota are broker configs too
    quotas = src.text("QuotaConfigs")
    for member in re.findall(r"\b(\w+_(?:RATE|SECOND)_CONFIG)\b", quotas):
        value = src.resolve(member, "QuotaConfigs")
        if value and ("throttled" in value or "per.second" in value):
            names.add(value)
    return names


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    gitdir, refs = argv[0], argv[1:]
    every: set[str] = set()
    for ref in refs:
        names = broker_config_names(gitdir, ref)
        print(f"# {ref}: {len(names)} names", file=sys.stderr)
        every |= names
    dated = [f"{ref} ({_git(gitdir, 'log', '-1', '--format=%cs', ref).strip()})" for ref in refs]
    print("# Apache Kafka's broker config names (KafkaConfig's ConfigDef and the dynamic broker quota")
    print(f"# configs) at {', '.join(dated)}; made by scripts/kafka_config_names.py. One name a line.")
    for name in sorted(every):
        print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
