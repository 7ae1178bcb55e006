"""The Jepsen-style checker (kcoord/testing/jepsen/) on made-up histories: a clean one passes,
and each anomaly the integration test looks for (a lost write, a duplicate, a record out of
order, a stale or lost commit, two leaders or coordinators in one epoch, a short ISR, a
transactional copy lost or made twice) is reported."""
from __future__ import annotations

from kcoord.testing.jepsen import Final, History, check


def sends(h: History, values: list[str], outcome: str = "ok") -> None:
    for v in values:
        h.complete(h.invoke("producer", "send", v), outcome)


def commit(h: History, group: str, offsets: dict[int, int], outcome: str = "ok") -> None:
    h.complete(h.invoke("member", "commit", {"group": group, "offsets": offsets}), outcome)


def clean() -> tuple[History, Final]:
    h = History()
    sends(h, ["0:0", "0:1", "1:0", "0:2"])
    commit(h, "g", {0: 2, 1: 1})
    commit(h, "g", {0: 3})
    h.observe("leader", ("t", 0, 0, 1), "zk")
    h.observe("leader", ("t", 0, 1, 2), "zk")
    h.observe("leader", ("t", 0, 1, 2), "node-3")
    h.observe("coordinator", ("g", 4, 2), "node-2")
    h.record("nemesis", "kill", 1)
    return h, Final(reads={0: ["0:0", "0:1", "0:2"], 1: ["1:0"]}, committed={"g": {0: 3, 1: 1}},
                    isr={("t", 0): ([1, 2, 3], [3, 2, 1])})


def kinds(report) -> list[str]:
    return sorted({a.kind for a in report.anomalies})


def test_a_clean_history_passes_with_its_counts():
    h, final = clean()
    r = check(h, final)
    assert r.valid, r.summary()
    assert r.counts["operations"] == 6 and r.counts["acknowledged"] == 4 and r.counts["faults"] == 1
    assert r.counts["lost"] == 0 and r.counts["duplicates"] == 0 and r.counts["commits acknowledged"] == 2
    assert "lost = 0" in r.summary() and "duplicates = 0" in r.summary()


def test_a_lost_acknowledged_write_is_reported():
    h, final = clean()
    final.reads[0].remove("0:1")
    r = check(h, final)
    assert kinds(r) == ["lost"] and r.counts["lost"] == 1 and "0:1" in r.of("lost")[0].detail


def test_an_unacknowledged_write_may_be_missing_or_present():
    h, final = clean()
    sends(h, ["1:1"], "info")
    sends(h, ["1:2"], "fail")
    assert check(h, final).valid
    final.reads[1] += ["1:1"]
    assert check(h, final).valid


def test_a_duplicate_is_reported():
    h, final = clean()
    final.reads[0].append("0:2")
    r = check(h, final)
    assert "duplicate" in kinds(r) and r.counts["duplicates"] == 1


def test_records_out_of_order_and_records_never_sent_are_reported():
    h, final = clean()
    final.reads[0] = ["0:1", "0:0", "0:2"]
    assert kinds(check(h, final)) == ["out-of-order"]
    h, final = clean()
    final.reads[1].append("1:9")
    assert kinds(check(h, final)) == ["phantom"]


def test_a_stale_commit_is_reported():
    h, final = clean()
    commit(h, "g", {1: 0})  # acknowledged after a commit of 1 had been
    final.committed["g"][1] = 0
    assert "stale-commit" in kinds(check(h, final))


def test_an_acknowledged_commit_lost_is_reported():
    h, final = clean()
    final.committed["g"][0] = 2  # the last acknowledged commit was 3
    r = check(h, final)
    assert kinds(r) == ["lost-commit"] and "3" in r.of("lost-commit")[0].detail
    final.committed["g"].pop(1)  # no committed offset at all
    assert len(check(h, final).of("lost-commit")) == 2


def test_a_commit_superseded_by_a_later_or_unknown_one_is_fine():
    h, final = clean()
    commit(h, "g", {0: 5}, "info")  # a timed-out commit may have landed
    final.committed["g"][0] = 5
    assert check(h, final).valid
    commit(h, "g", {0: 7}, "fail")  # a refused one may not
    final.committed["g"][0] = 7
    assert kinds(check(h, final)) == ["lost-commit"]


def test_two_leaders_or_coordinators_in_one_epoch_are_reported():
    h, final = clean()
    h.observe("leader", ("t", 0, 1, 3), "node-3")
    assert kinds(check(h, final)) == ["split-leader"]
    h, final = clean()
    h.observe("coordinator", ("g", 4, 1), "node-1")
    h.observe("coordinator", ("g", 5, 1), "node-1")
    assert kinds(check(h, final)) == ["split-coordinator"]


def test_an_isr_short_of_its_replicas_is_reported():
    h, final = clean()
    final.isr[("t", 1)] = ([1, 2, 3], [1, 2])
    assert kinds(check(h, final)) == ["isr-not-full"]


def test_the_transactional_copy_holds_each_committed_input_once():
    h, final = clean()
    final.txn_committed = {0: 2, 1: 1}
    final.txn_output = ["copy-0:0", "copy-1:0", "copy-0:1"]
    r = check(h, final)
    assert r.valid and r.counts["transactional copies"] == 3
    final.txn_output = ["copy-0:0", "copy-1:0"]
    assert kinds(check(h, final)) == ["txn-lost"]
    final.txn_output = ["copy-0:0", "copy-1:0", "copy-0:1", "copy-0:0"]
    assert kinds(check(h, final)) == ["txn-duplicate"]
    final.txn_output = ["copy-0:0", "copy-1:0", "copy-0:1", "copy-0:2"]  # beyond the committed offset
    assert kinds(check(h, final)) == ["txn-extra"]


def test_open_invocations_end_as_unknown():
    h = History()
    h.invoke("producer", "send", "0:0")
    h.close_open()
    (inv, comp), = h.pairs("send")
    assert comp is not None and comp.type == "info"
    assert check(h, Final(reads={0: []})).valid


def test_a_graceful_stop_that_had_to_be_killed_is_reported():
    h, final = clean()
    h.record("nemesis", "stop", {"fault": "restart-graceful", "node": 2, "exit": 0})
    assert check(h, final).valid
    h.record("nemesis", "stop", {"fault": "restart-graceful", "node": 1, "exit": -9})
    assert kinds(check(h, final)) == ["stop-hung"]


def test_a_cut_off_counts_as_a_fault_and_its_heal_does_not():
    h, final = clean()
    h.record("nemesis", "cut-off", 2)
    h.record("nemesis", "heal", 2)
    h.record("nemesis", "start", 1)
    r = check(h, final)
    assert r.valid, r.summary()
    assert r.counts["faults"] == 2
