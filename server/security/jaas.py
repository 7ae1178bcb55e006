"""Kafka's sasl.jaas.config values (one JAAS login module entry):

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";

A broker reads PLAIN users from the `user_<name>="<password>"` options of the PlainLoginModule
entry in listener.name.<listener>.plain.sasl.jaas.config (Kafka's PlainServerCallbackHandler).
Parsed like Kafka's JaasConfig: words, double-quoted strings with backslash escapes, `=`, `;`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_FLAGS = ("required", "requisite", "sufficient", "optional")


class JaasError(ValueError):
    pass


@dataclass
class JaasEntry:
    module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def _tokens(text: str) -> list[tuple[str, str]]:
    """(kind, value): kind is 'word', 'string' or the punctuation itself."""
    out: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c in "=;":
            out.append((c, c))
            i += 1
        elif c == '"':
            i += 1
            buf = []
            while i < n and text[i] != '"':
                if text[i] == "\\" and i + 1 < n:
                    i += 1
                buf.append(text[i])
                i += 1
            if i >= n:
                raise JaasError("unterminated quoted string in JAAS config")
            i += 1
            out.append(("string", "".join(buf)))
        elif c == "/" and text.startswith("//", i):  # a comment to the end of the line
            while i < n and text[i] != "\n":
                i += 1
        else:
            j = i
            while j < n and not text[j].isspace() and text[j] not in '=;"':
                j += 1
            out.append(("word", text[i:j]))
            i = j
    return out


def parse_jaas_config(text: str) -> list[JaasEntry]:
    tokens = _tokens(text)
    entries: list[JaasEntry] = []
    i = 0
    while i < len(tokens):
        kind, module = tokens[i]
        if kind != "word":
            raise JaasError("JAAS config entry must start with a login module class name")
        if i + 1 >= len(tokens) or tokens[i + 1][1].lower() not in _FLAGS:
            raise JaasError(f"Invalid JAAS config: the login module {module} needs a control flag "
                            f"({', '.join(_FLAGS)})")
        entry = JaasEntry(module, tokens[i + 1][1].lower())
        i += 2
        while i < len(tokens) and tokens[i][0] != ";":
            if i + 2 >= len(tokens) or tokens[i][0] != "word" or tokens[i + 1][0] != "=" \
                    or tokens[i + 2][0] not in ("word", "string"):
                raise JaasError(f"Invalid JAAS config: options of {module} must be name=value")
            entry.options[tokens[i][1]] = tokens[i + 2][1]
            i += 3
        if i >= len(tokens):
            raise JaasError("Invalid JAAS config: the entry must end with ';'")
        i += 1
        entries.append(entry)
    if not entries:
        raise JaasError("JAAS config has no login module entry")
    return entries


def plain_users(text: str) -> dict[str, str]:
    """The user_<name>="<password>" options of the PlainLoginModule entry (Kafka wants exactly
    one login module in a sasl.jaas.config)."""
    entries = parse_jaas_config(text)
    if len(entries) != 1:
        raise JaasError(f"JAAS config property contains {len(entries)} login modules, should be 1 module")
    entry = entries[0]
    if entry.module != PLAIN_LOGIN_MODULE:
        return {}
    return {k[len("user_"):]: v for k, v in entry.options.items() if k.startswith("user_")}
