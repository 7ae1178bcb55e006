"""The example clients shipped for users (examples/, also run by docker compose's demo
profile) work against a real kcoord: the Python producer fills a topic, and the Python and Java
consumers share one group, together reading every message once."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

from clientlib import java_classpath
from conftest import ROOT
from kafka.admin import KafkaAdminClient, NewTopic

EXAMPLES = ROOT / "examples"
N = 200


def test_python_and_java_examples_share_a_group(kcoord, tmp_path):
    admin = KafkaAdminClient(bootstrap_servers=kcoord.bootstrap)
    admin.create_topics([NewTopic("demo", 2, 1)])
    admin.close()
    env = {**os.environ, "KAFKA_BOOTSTRAP": kcoord.bootstrap}
    subprocess.run([sys.executable, str(EXAMPLES / "python" / "demo.py"), "produce", "demo", str(N)],
                   env=env, check=True, timeout=120, capture_output=True)
    classes = tmp_path / "classes"
    subprocess.run(["javac", "-d", str(classes), "-cp", java_classpath(),
                    str(EXAMPLES / "java" / "src" / "main" / "java" / "demo" / "DemoConsumer.java")],
                   check=True, timeout=180, capture_output=True)
    procs = [
        subprocess.Popen(["java", "-cp", f"{classes}{os.pathsep}{java_classpath()}", "demo.DemoConsumer",
                          kcoord.bootstrap, "demo", "demo-group"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True),
        subprocess.Popen([sys.executable, str(EXAMPLES / "python" / "demo.py"), "consume", "demo", "demo-group"],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True),
    ]
    seen: list[list[str]] = [[], []]

    def read(i: int) -> None:
        for line in procs[i].stdout:  # type: ignore[union-attr]
            if line.startswith("demo["):
                seen[i].append(line.split(" ", 1)[0])

    readers = [threading.Thread(target=read, args=(i,), daemon=True) for i in range(2)]
    for t in readers:
        t.start()
    try:
        deadline = time.monotonic() + 180
        while sum(map(len, seen)) < N and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1)  # nothing more may arrive: no duplicates after the group settled
    finally:
        for p in procs:
            p.terminate()
            p.wait(30)
    records = seen[0] + seen[1]
    assert len(records) == N and len(set(records)) == N, (len(seen[0]), len(seen[1]))
