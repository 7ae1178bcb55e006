"""kafka-configs.sh for the SCRAM credentials of users: --alter --entity-type users --entity-name u
--add-config 'SCRAM-SHA-256=[iterations=8192,password=p]' (or --delete-config SCRAM-SHA-512)
through AlterUserScramCredentials, and the SCRAM part of --describe --entity-type users through
DescribeUserScramCredentials, with ConfigCommand's checks, messages and output. Which path a
users command takes (quotas or SCRAM credentials) is decided in server/kafkatools/configs.py, as
ConfigCommand decides it: quota configs go to the quota APIs, SCRAM-* entries come here."""
from __future__ import annotations

import re

from kafka.protocol.admin.users import AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest

from kcoord.server.kafkatools.wire import Client, KafkaCallError, check
from kcoord.server.security.scram import ScramMechanism, salted_password, secure_random_string

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
QUOTA_CONFIGS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate")
DEFAULT_ITERATIONS = 4096  # ConfigCommand's DefaultScramIterations
_CREDENTIAL = re.compile(r"(?:iterations=(-?[0-9]*),)?password=(.*)", re.DOTALL)
RESOURCE_NOT_FOUND = 91


class ScramUsageError(Exception):
    """ConfigCommand's IllegalArgumentException: the message alone, on stderr."""


def is_scram(key: str) -> bool:
    return key in SCRAM_MECHANISMS


def is_quota(key: str) -> bool:
    return key in QUOTA_CONFIGS


def takes_scram_path(add: dict[str, str], remove: list[str]) -> bool:
    """ConfigCommand.alterConfig for users alone: the SCRAM path unless a quota config is added
    or deleted (unknown names are refused on either path)."""
    return not any(is_quota(k) for k in [*add, *remove])


def _scala_set(keys: list[str]) -> str:
    return f"Set({', '.join(keys)})"


def _scala_list(keys: list[str]) -> str:
    return f"List({', '.join(keys)})"


def check_users(names: list[str], add: dict[str, str], remove: list[str]) -> None:
    """ConfigCommand's checks of a users command (alone, not with clients), in its order, before
    it takes the quota or the SCRAM path."""
    unknown_add = [k for k in add if not is_scram(k) and not is_quota(k)]
    unknown_del = [k for k in remove if not is_scram(k) and not is_quota(k)]
    if unknown_add:
        raise ScramUsageError("Only quota and SCRAM credential configs can be added for 'users' using "
                              f"--bootstrap-server. Unexpected config names: {_scala_set(unknown_add)}")
    if unknown_del:
        raise ScramUsageError("Only quota and SCRAM credential configs can be deleted for 'users' using "
                              f"--bootstrap-server. Unexpected config names: {_scala_list(unknown_del)}")
    if any(is_scram(k) for k in [*add, *remove]):
        if any(n == "" for n in names):
            raise ScramUsageError("The use of --entity-default or --user-defaults is not allowed with User SCRAM "
                                  "Credentials using --bootstrap-server.")
        if any(is_quota(k) for k in [*add, *remove]):
            raise ScramUsageError("Cannot alter both quota and SCRAM credential configs simultaneously for 'users' "
                                  "using --bootstrap-server.")


def _iterations_and_password(mech: ScramMechanism, value: str) -> tuple[int, str]:
    m = _CREDENTIAL.fullmatch(value)
    if m is None:
        raise ScramUsageError(f"Invalid credential property {mech.mechanism_name}={value}")
    raw, password = m.group(1), m.group(2)
    iterations = int(raw) if raw not in (None, "", "-1") else DEFAULT_ITERATIONS
    if iterations < mech.min_iterations:
        raise ScramUsageError(f"Iterations {iterations} is less than the minimum {mech.min_iterations} required for "
                              f"{mech.mechanism_name}")
    return iterations, password


def _salt() -> bytes:
    """What the Java Admin's UserScramCredentialUpsertion makes when given a password alone
    (ScramFormatter.secureRandomBytes): a 130-bit random number in base 36, as bytes."""
    return secure_random_string().encode()


def alter(client: Client, names: list[str], add: dict[str, str], remove: list[str]) -> None:
    """alterUserScramCredentialConfigs: the deletions and upsertions of one user in one request."""
    check_users(names, add, remove)
    user = names[0]
    A = AlterUserScramCredentialsRequest
    deletions = [A.ScramCredentialDeletion(name=user, mechanism=int(ScramMechanism.from_name(k))) for k in remove]
    upsertions = []
    for key, value in add.items():
        mech = ScramMechanism.from_name(key)
        iterations, password = _iterations_and_password(mech, value)
        salt = _salt()
        upsertions.append(A.ScramCredentialUpsertion(name=user, mechanism=int(mech), iterations=iterations, salt=salt,
                                                     salted_password=salted_password(mech, password, salt, iterations)))
    resp = client.send(A, deletions=deletions, upsertions=upsertions)
    for r in resp.results:
        check(r.error_code, r.error_message)


def describe(client: Client, names: list[str]) -> None:
    """describeClientQuotaAndUserScramCredentialConfigs' SCRAM lines: every user asked for that
    has a credential (every user with one when none is named), as the Java Admin's users()
    lists them."""
    D = DescribeUserScramCredentialsRequest
    resp = client.send(D, users=[D.UserName(name=n) for n in names] if names else None)
    check(resp.error_code, resp.error_message)
    for r in resp.results:
        if r.error_code == RESOURCE_NOT_FOUND:
            continue
        if r.error_code:
            # the Java Admin's future fails with an ExecutionException around the error
            print(f"Error retrieving SCRAM credential configs for user-principal '{r.user}': ExecutionException: "
                  f"{KafkaCallError(r.error_code, r.error_message).java()}")
            continue
        infos = ", ".join(f"{ScramMechanism.from_type(c.mechanism).mechanism_name}=iterations={c.iterations}"
                          for c in r.credential_infos)
        print(f"SCRAM credential configs for user-principal '{r.user}' are {infos}")
