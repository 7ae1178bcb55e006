"""The codec fuzzing of test_fuzz_dispatch.py against an authorizing dispatcher: every request
passes through its API's authorization policy (server/security/guard.py) first. Two
principals: one the ACLs allow everything (a super user), one they allow nothing, so both the
policies' pass-through and their refusals meet every valid and mutated request. The property is
the same: a response that decodes, None, or a closed connection — never an escaped error."""
from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from test_fuzz_dispatch import TOPIC, Env, make_seeds, mutated, stop_env

from kcoord.protocol.api import API_TABLE
from kcoord.server.broker import Broker
from kcoord.server.config import Config
from kcoord.server.node import dispatcher_for
from kcoord.server.session import Session


class _Env(Env):
    """Env whose dispatcher is called with a session of a given principal."""

    session: Session | None = None

    async def _check(self, frame: bytes, guard: bool) -> str:  # type: ignore[override]
        original = self.dispatcher.handle
        session = self.session
        self.dispatcher.handle = lambda f, _host: original(f, session)  # type: ignore[method-assign]
        try:
            return await Env._check(self, frame, guard)
        finally:
            self.dispatcher.handle = original  # type: ignore[method-assign]


def start(data) -> _Env:
    loop = asyncio.new_event_loop()
    broker = Broker(Config({
        "log.dirs": str(data), "offsets.topic.num.partitions": 4, "group.initial.rebalance.delay.ms": 0,
        "auto.create.topics.enable": "false", "listeners": "PLAINTEXT://127.0.0.1:0",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:root",
    }))

    async def boot() -> None:
        await broker.start()
        broker.start_background()
        await asyncio.wait_for(broker._background[0], 20)  # noqa: SLF001
        broker.create_topic(TOPIC, 2, {})

    loop.run_until_complete(boot())
    topic = broker.topics.get(TOPIC)
    assert topic is not None
    return _Env(loop, broker, dispatcher_for(broker), make_seeds(topic.topic_id))


def session(principal: str) -> Session:
    s = Session(None, "127.0.0.1")
    s.principal = principal
    return s


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> Iterator[_Env]:
    e = start(tmp_path_factory.mktemp("fuzz-authorizing") / "data")
    yield e
    failures = stop_env(e)
    assert not failures, "\n".join(failures[:5])


def test_every_seed_for_an_allowed_and_a_refused_principal(env: _Env) -> None:
    outcomes: dict[str, Counter] = {}
    for principal in ("User:root", "User:nobody"):
        env.session = session(principal)
        outcomes[principal] = Counter(env.check(seed.frame) for seed in env.seeds)
    assert not env.failures, env.failures[:5]
    # the super user is answered as without an authorizer; the refused one mostly with errors
    assert outcomes["User:root"]["ok"] >= 90, outcomes
    assert outcomes["User:nobody"]["error"] > outcomes["User:root"]["error"], outcomes
    assert len(env.seeds) == sum(s.max_version - s.min_version + 1 for s in API_TABLE.values())


@pytest.mark.parametrize("principal", ["User:root", "User:nobody"])
def test_mutations_through_the_policies(env: _Env, principal: str) -> None:
    env.session = session(principal)

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(case=mutated(env.seeds))
    def run(case) -> None:
        _seed, frame = case
        env.outcomes[env.check(frame)] += 1
        assert not env.failures, env.failures[:5]

    run()
    assert env.outcomes["ok"] + env.outcomes["error"] > 40, env.outcomes
