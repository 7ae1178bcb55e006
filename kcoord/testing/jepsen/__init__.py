"""A Jepsen-style history and its checker for kcoord clusters (tests/integration/test_jepsen.py).

    history = History()
    i = history.invoke("producer", "send", "3:17")      # partition 3, record 17
    history.complete(i, "ok")                           # or "fail" (surely not done), "info" (unknown)
    history.observe("leader", ("t", 3, 5, 2), source="zk")   # topic, partition, epoch, leader
    report = check(history, Final(...))
    print(report.summary()); assert report.valid, report.anomalies

history.py records; checker.py decides. Neither talks to a server: the test gathers what the
checker needs (the final reads, committed offsets, ISRs) and hands it over.
"""
from kcoord.testing.jepsen.checker import Anomaly, Final, Report, check
from kcoord.testing.jepsen.history import History, Op

__all__ = ["Anomaly", "Final", "History", "Op", "Report", "check"]
