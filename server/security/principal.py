"""Principals as Kafka's DefaultKafkaPrincipalBuilder makes them.

- PLAINTEXT (and SSL without a client certificate): User:ANONYMOUS.
- SSL with a client certificate: User:<name>, where <name> is the certificate's subject
  distinguished name in RFC 2253 form, as Java's X500Principal.getName() prints it
  (`CN=alice,OU=eng,O=example`), passed through ssl.principal.mapping.rules.
- SASL: User:<authorization id> (server/security/sasl.py).
"""
from __future__ import annotations

import re

ANONYMOUS = "User:ANONYMOUS"


def user(name: str) -> str:
    return f"User:{name}"


# ---- the subject DN of a DER certificate, printed as Java's X500Principal.getName(RFC2253) ----

# RFC 2253 keywords (Java prints these by name, every other attribute as its OID).
_KEYWORDS = {
    "2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O",
    "2.5.4.11": "OU", "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
# DER string types Java prints as text (others are printed as #hex of their DER encoding)
_STRING_TAGS = {0x0C: "utf-8", 0x13: "ascii", 0x14: "latin-1", 0x16: "ascii", 0x1A: "ascii",
                0x1E: "utf-16-be", 0x1C: "utf-32-be"}
_ESCAPEES = ',=+<>#;"\\'


class CertificateError(ValueError):
    """The peer certificate's DER could not be read."""


def _tlv(der: bytes, pos: int) -> tuple[int, int, int]:
    """(tag, start of content, end of content) of the DER element at pos."""
    if pos + 2 > len(der):
        raise CertificateError("truncated DER")
    tag, n = der[pos], der[pos + 1]
    pos += 2
    if n & 0x80:
        k = n & 0x7F
        if k == 0 or k > 4 or pos + k > len(der):
            raise CertificateError("bad DER length")
        n = int.from_bytes(der[pos:pos + k], "big")
        pos += k
    if pos + n > len(der):
        raise CertificateError("truncated DER")
    return tag, pos, pos + n


def _children(der: bytes, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """(tag, element start, content start, content end) of each element in der[start:end]."""
    out = []
    pos = start
    while pos < end:
        tag, cs, ce = _tlv(der, pos)
        out.append((tag, pos, cs, ce))
        pos = ce
    return out


def _oid(body: bytes) -> str:
    if not body:
        raise CertificateError("empty OID")
    first = body[0]
    parts = [min(first // 40, 2), first - 40 * min(first // 40, 2)]
    value = 0
    for b in body[1:]:
        value = (value << 7) | (b & 0x7F)
        if not b & 0x80:
            parts.append(value)
            value = 0
    return ".".join(map(str, parts))


def _escape(value: str) -> str:
    out = "".join("\\" + c if c in _ESCAPEES else c for c in value)
    if out.startswith(" "):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def subject_dn(der: bytes) -> str:
    """The subject of a DER X.509 certificate as RFC 2253 text, last RDN first."""
    _, cs, ce = _tlv(der, 0)  # Certificate
    tbs = _children(der, cs, ce)
    if not tbs or tbs[0][0] != 0x30:
        raise CertificateError("no tbsCertificate")
    fields = _children(der, tbs[0][2], tbs[0][3])
    i = 1 if fields and fields[0][0] == 0xA0 else 0  # [0] EXPLICIT version
    # serialNumber, signature, issuer, validity, subject
    if len(fields) < i + 5:
        raise CertificateError("short tbsCertificate")
    _, _, ns, ne = fields[i + 4]
    rdns = []
    for tag, _, rs, re_ in _children(der, ns, ne):
        if tag != 0x31:
            raise CertificateError("RDN is not a SET")
        avas = []
        for atag, _, a_s, a_e in _children(der, rs, re_):
            if atag != 0x30:
                raise CertificateError("AttributeTypeAndValue is not a SEQUENCE")
            parts = _children(der, a_s, a_e)
            if len(parts) != 2 or parts[0][0] != 0x06:
                raise CertificateError("bad AttributeTypeAndValue")
            oid = _oid(der[parts[0][2]:parts[0][3]])
            vtag, vstart, vcs, vce = parts[1]
            keyword = _KEYWORDS.get(oid)
            if keyword is not None and vtag in _STRING_TAGS:
                avas.append(f"{keyword}={_escape(der[vcs:vce].decode(_STRING_TAGS[vtag], 'replace'))}")
            else:
                avas.append(f"{keyword or oid}=#{der[vstart:vce].hex()}")
        rdns.append("+".join(avas))
    return ",".join(reversed(rdns))


# ---- ssl.principal.mapping.rules (Kafka's SslPrincipalMapper) ----

_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_RULE_PARSER = re.compile(_RULE)
_BACKREF = re.compile(r"\$(\d+)")


class NoMatchingRule(ValueError):
    pass


class _Rule:
    def __init__(self, pattern: str | None = None, replacement: str = "", lower: bool = False,
                 upper: bool = False) -> None:
        self.pattern = re.compile(pattern) if pattern is not None else None
        self.replacement = replacement
        self.lower = lower
        self.upper = upper

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:  # DEFAULT
            return dn
        if not self.pattern.fullmatch(dn):
            return None
        groups = self.pattern.groups
        result = self.pattern.sub(lambda m: _expand(self.replacement, m, groups), dn)
        if self.lower:
            return result.lower()
        if self.upper:
            return result.upper()
        return result


def _expand(replacement: str, m: re.Match[str], groups: int) -> str:
    """Java's Matcher.replaceAll replacement: $n back references (a $n beyond the groups is
    shortened digit by digit, then kept literally, as Kafka's escapeLiteralBackReferences does),
    backslash escapes."""
    out = []
    i = 0
    while i < len(replacement):
        c = replacement[i]
        if c == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1])
            i += 2
            continue
        if c == "$":
            d = _BACKREF.match(replacement, i)
            if d is not None:
                digits = d.group(1)
                n = len(digits)
                while n > 1 and int(digits[:n]) > groups:
                    n -= 1
                idx = int(digits[:n])
                if idx <= groups:
                    out.append(m.group(idx) or "")
                    i += 1 + n
                    continue
                out.append("$")
                i += 1
                continue
        out.append(c)
        i += 1
    return "".join(out)


class SslPrincipalMapper:
    """ssl.principal.mapping.rules: `DEFAULT` and `RULE:pattern/replacement/[LU]`, tried in
    order; the first that matches names the principal."""

    def __init__(self, rules: str = "DEFAULT") -> None:
        self.text = rules
        self.rules: list[_Rule] = []
        for rule in (m.group(1) for m in _RULE_SPLITTER.finditer((rules or "DEFAULT").strip())):
            m = _RULE_PARSER.match(rule)
            if m is None or m.end() != len(rule):
                raise ValueError(f"Invalid rule: {rule}")
            if m.group(1) is not None:
                self.rules.append(_Rule())
            elif m.group(2) is not None:
                self.rules.append(_Rule(m.group(2), m.group(4), m.group(6) == "L", m.group(6) == "U"))
            elif m.group(7):
                raise ValueError(f"Invalid rule: {rule}")

    def name(self, dn: str) -> str:
        for rule in self.rules:
            got = rule.apply(dn)
            if got is not None:
                return got
        raise NoMatchingRule(f"No rules apply to {dn}, rules {self.text}")


def ssl_principal(peer_der: bytes | None, mapper: SslPrincipalMapper) -> str:
    """The principal of a TLS connection: User:ANONYMOUS without a client certificate."""
    if not peer_der:
        return ANONYMOUS
    return user(mapper.name(subject_dn(peer_der)))
