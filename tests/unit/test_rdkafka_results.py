"""scripts/rdkafka_results.py: reading librdkafka's test catalogue and test-runner output, and
the CI verdict over the table (the runs themselves: `make rdkafka-suite`)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import rdkafka_results as res  # noqa: E402

TEST_C = r'''
#define _TEST(NAME, FLAGS, ...) { .name = #NAME, .flags = FLAGS, __VA_ARGS__ }
struct test tests[] = {
    /* Special MAIN test to hold over-all timings, etc. */
    {.name = "<MAIN>", .flags = TEST_F_LOCAL},
    _TEST(0000_unittests,
          TEST_F_LOCAL,
          /* heavy, (with parentheses) */
          _THRES(.ucpu = 100.0, .scpu = 20.0, .rss = 900.0)),
    _TEST(0001_multiobj, 0),
    _TEST(0028_long_topicnames,
          TEST_F_KNOWN_ISSUE,
          TEST_BRKVER(0, 9, 0, 0),
          .extra = "https://github.com/confluentinc/librdkafka/issues/529"),
    // _TEST(0029_commented_out, 0),
#if WITH_SOCKEM
    _TEST(0049_consume_conn_close, TEST_F_SOCKEM, TEST_BRKVER(0, 9, 0, 0)),
#endif
    _TEST(0055_producer_latency, TEST_F_KNOWN_ISSUE_WIN32),
    _TEST(0103_transactions,
          0,
          TEST_BRKVER(0, 11, 0, 0),
          .scenario = "default,ak23"),
    _TEST(0107_topic_recreate, 0, TEST_BRKVER_TOPIC_ADMINAPI, .scenario = "noautocreate"),
    _TEST(8000_idle, TEST_F_MANUAL),
    {NULL}};
'''


def test_catalog_reads_every_entry_with_flags_and_scenario():
    got = {t.name: t for t in res.catalog(TEST_C)}
    assert list(got) == ["0000_unittests", "0001_multiobj", "0028_long_topicnames", "0049_consume_conn_close",
                         "0055_producer_latency", "0103_transactions", "0107_topic_recreate", "8000_idle"]
    assert got["0000_unittests"].local and not got["0001_multiobj"].local
    assert got["0028_long_topicnames"].known_issue
    assert not got["0055_producer_latency"].known_issue      # only a known issue on Windows
    assert got["8000_idle"].manual
    assert got["0103_transactions"].run_scenario == "default"
    assert got["0107_topic_recreate"].run_scenario == "noautocreate"
    assert got["0049_consume_conn_close"].id == "0049"


def test_catalog_refuses_a_file_without_tests():
    with pytest.raises(ValueError):
        res.catalog("struct test tests[] = { {NULL}};")


PASSED_RUN = """\
\x1b[36m[0001_multiobj               /  0.000s] ================= Running test 0001_multiobj =================
\x1b[0m\x1b[32m[0001_multiobj               /  1.263s] \x1b[32m================= Test 0001_multiobj PASSED =================\x1b[0m
TEST 20261123060626 (bare, scenario default) SUMMARY
#==================================================================#
|\x1b[32m <MAIN>                                   |     PASSED |   2.030s \x1b[0m|
|\x1b[32m 0001_multiobj                            |     PASSED |   1.263s \x1b[0m|
|\x1b[36m 0002_unkpart                             |    SKIPPED |   0.000s \x1b[0m|\x1b[36m not applicable for broker version 0.8.0.0\x1b[0m
#==================================================================#
"""

FAILED_RUN = """\
[0081_admin                  /  0.000s] ================= Running test 0081_admin =================
\x1b[0m\x1b[31m### Test "0081_admin (do_test_DeleteTopics:1234: with timeout)" failed at 0081-admin.c:345:do_test_DeleteTopics() at Mon Nov 23 06:06:25 2026: ###
do_test_DeleteTopics():345: DeleteTopics failed: Broker: Unsupported version
### Test "0081_admin" failed at 0081-admin.c:999:other() at Mon Nov 23 06:06:26 2026: ###
a second failure
[0081_admin                  /  3.000s] \x1b[31m================= Test 0081_admin FAILED =================\x1b[0m
[0082_fetch_max_bytes        /  0.000s] ================= Running test 0082_fetch_max_bytes =================
[0082_fetch_max_bytes        /  0.010s] SKIPPING TEST: Requires something
[0082_fetch_max_bytes        /  0.010s] ================= Test 0082_fetch_max_bytes SKIPPED =================
[0083_cb_event               /  0.000s] ================= Running test 0083_cb_event =================
"""


def test_parse_output_reads_the_summary():
    got = res.parse_output(PASSED_RUN)
    assert got["0001_multiobj"].state == "passed"
    assert got["0001_multiobj"].seconds == pytest.approx(1.263)
    assert got["<MAIN>"].state == "passed"
    assert got["0002_unkpart"].state == "skipped"
    assert got["0002_unkpart"].failure == "not applicable for broker version 0.8.0.0"


def test_parse_output_without_summary_keeps_the_first_failure_and_sees_a_hang():
    got = res.parse_output(FAILED_RUN)
    assert got["0081_admin"].state == "failed"
    assert got["0081_admin"].failure == "0081-admin.c:345: do_test_DeleteTopics():345: DeleteTopics failed: Broker: Unsupported version"
    assert got["0081_admin"].subtest == "do_test_DeleteTopics:1234: with timeout"
    assert got["0082_fetch_max_bytes"].state == "skipped"
    assert got["0082_fetch_max_bytes"].failure == "Requires something"
    assert got["0083_cb_event"].state == "timeout"       # started, never finished
    assert "0084_destroy_flags" not in got


def row(name: str, result: str) -> res.Row:
    return res.Row(id=name[:4], name=name, scenario="default", result=result, seconds=1.0)


def test_row_result_counts_a_pass_on_the_rerun_as_flaky():
    P, F = res.Outcome(state="passed"), res.Outcome(state="failed")
    assert res.row_result([P]) == "passed"
    assert res.row_result([F, P]) == "flaky"
    assert res.row_result([F, F]) == "failed"
    assert res.row_result([res.Outcome(state="timeout"), res.Outcome(state="timeout")]) == "timeout"


def test_compare_finds_regressions_and_new_passes():
    committed = {"0001_a": {"result": "passed"}, "0002_b": {"result": "failed"}, "0003_c": {"result": "flaky"},
                 "0004_d": {"result": "passed"}}
    rows = [row("0001_a", "failed"), row("0002_b", "passed"), row("0003_c", "timeout"), row("0004_d", "flaky"),
            row("0005_e", "passed")]
    regressions, newly = res.compare(committed, rows)
    assert [r.name for r in regressions] == ["0001_a", "0003_c"]
    assert [r.name for r in newly] == ["0002_b", "0005_e"]


def test_render_markdown_lists_every_test_not_passing_with_its_reason():
    meta = {"librdkafka": "2.14.2", "date": "2026-11-23", "group_protocol": "classic", "jobs": 2,
            "wall_seconds": 900, "cores": 2}
    bad = row("0081_admin", "failed")
    bad.reason, bad.owner = "DeleteTopics is not served", "admin-topics"
    odd = row("0099_x", "failed")
    odd.failure, odd.kafka_differs = "x.c:1: boom", "x.c:1 expects Y; Kafka's Z.scala:10 does W"
    text = res.render_markdown(meta, [row("0001_a", "passed"), row("0002_b", "flaky"), bad, odd],
                               {"0097_ssl_verify": "needs SSL"})
    assert text.startswith("**2 of 4**")
    assert "| 0081_admin | failed | 1 | DeleteTopics is not served (waits for: admin-topics) |" in text
    assert "not yet diagnosed: x.c:1: boom" in text and "Kafka does not do" in text
    assert "- 0097_ssl_verify: needs SSL" in text
    assert "0002_b" in text and "| 0001_a |" not in text


def test_replace_section_needs_its_markers():
    text = "a\n<!-- s -->\nold\n<!-- e -->\nb\n"
    assert res.replace_section(text, "<!-- s -->", "<!-- e -->", "new") == "a\n<!-- s -->\nnew\n<!-- e -->\nb\n"
    with pytest.raises(ValueError):
        res.replace_section("no markers", "<!-- s -->", "<!-- e -->", "new")


def test_the_report_file_gives_states_lost_with_an_aborted_stdout():
    text = FAILED_RUN + '### Test "<MAIN>" failed at test.c:1802:test_wait_exit() at Mon: ###\n4 thread(s) still active\n'
    got = res.parse_output(text)
    report = {"tests": {"<MAIN>": {"state": "PASSED", "duration": 9.0},
                        "0081_admin": {"state": "FAILED", "duration": 3.5},
                        "0083_cb_event": {"state": "PASSED", "duration": 2.0},
                        "0099_other": {"state": "SKIPPED", "duration": 0.0}}}
    res.apply_report(got, report)
    assert got["<MAIN>"].state == "failed" and got["<MAIN>"].failure.endswith("4 thread(s) still active")
    assert got["0081_admin"].seconds == 3.5
    assert got["0083_cb_event"].state == "passed"
    assert "0099_other" not in got          # not one of this process's tests


def test_selection_is_one_runner_process_per_id_and_scenario():
    import rdkafka_suite as suite

    tests = res.catalog(TEST_C.replace("    _TEST(8000_idle", '    _TEST(0107_other_default, 0),\n    _TEST(8000_idle'))
    excluded = suite.excluded_tests(tests, {"excluded": {"0049_consume_conn_close": "needs X"}})
    assert excluded == {"0028_long_topicnames": excluded["0028_long_topicnames"], "0049_consume_conn_close": "needs X"}
    assert "known issue" in excluded["0028_long_topicnames"]
    units = {u.key: [t.name for t in u.tests] for u in suite.select(tests, excluded, None, None)}
    assert units == {"0001": ["0001_multiobj"], "0055": ["0055_producer_latency"], "0103": ["0103_transactions"],
                     "0107-noautocreate": ["0107_topic_recreate"], "0107": ["0107_other_default"]}
    only = suite.select(tests, excluded, {"0103"}, None)
    assert [u.key for u in only] == ["0103"]


def test_the_committed_table_and_the_doc_agree():
    """tests/rdkafka/results.json is what docs/compatibility.md's librdkafka section shows."""
    import rdkafka_suite as suite

    assert suite.update_doc("classic", check=True) == 0, "run: python scripts/rdkafka_suite.py doc"


def test_the_three_broker_tests_are_counted_apart_and_passing_tests_keep_their_notes():
    meta = {"librdkafka": "2.14.2", "date": "2026-11-27", "group_protocol": "classic", "jobs": 3,
            "wall_seconds": 900, "cores": 2}
    txn, fff, one = row("0103_transactions", "failed"), row("0101_fetch_from_follower", "passed"), row("0001_a", "passed")
    txn.brokers = fff.brokers = 3
    txn.reason = "verification asks the local coordinator"
    text = res.render_markdown(meta, [one, fff, txn], {}, {"0101_fetch_from_follower": "no preferred replica",
                                                           "0001_a": "", "0999_gone": "not in the rows"})
    assert text.startswith("**2 of 3**")
    assert "(0101, 0103) ran against a 3-node kcoord cluster" in text and "1 of 2 pass" in text
    assert "| 0103_transactions (3 nodes) | failed | 1 | verification asks the local coordinator |" in text
    assert "- 0101_fetch_from_follower: no preferred replica" in text
    assert "0999_gone" not in text
    assert "three brokers" not in res.render_markdown(meta, [one], {})


def test_suite_toml_sends_the_three_broker_ids_to_a_cluster():
    import rdkafka_suite as suite

    tests = res.catalog(TEST_C)
    conf = {"cluster": {"ids": ["0103"], "nodes": 3}, "security": {"0103": "SASL_PLAINTEXT"},
            "time_limit": {"0001": 50}}
    units = {u.key: u for u in suite.configure(suite.select(tests, {}, None, None), conf)}
    assert units["0103"].brokers == 3 and units["0103"].security == "SASL_PLAINTEXT"
    assert units["0001"].brokers == 1 and units["0001"].time_limit == 50 and units["0001"].security == "PLAINTEXT"
    real = suite.load_suite_toml()["cluster"]
    assert set(real["ids"]) == {"0098", "0101", "0103", "0107", "0111", "0142"} and real["nodes"] == 3
