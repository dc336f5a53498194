"""The dashboard's high-availability section (web/dashboard, docs/ha.md
"Operators") in headless chromium: a leader streaming its log to a standby
shows its role, term, log size, last snapshot and each standby's lag; the
standby shows its own lag and its link; a crescentd without replication
shows no such section."""
import json

from conftest import free_port, http_get
from test_dashboard import browser, wait_for  # noqa: F401 (fixture)
from test_replication import Store, ha, leader_args, standby_args


def health_ha(d):
    return json.loads(http_get(d.port, "/health")[1])["ha"]


def shown(driver):
    return driver.execute_script(
        "const o = {};"
        "for (const el of document.querySelectorAll('[data-ha]'))"
        "  o[el.dataset.ha] = [el.dataset.value, el.textContent, el.offsetParent !== null];"
        "return o;")


def polls(driver):
    return int(driver.execute_script("return document.body.dataset.polls || 0"))


def test_dashboard_shows_role_term_lag_log_and_snapshot(daemon, browser, tmp_path):
    repl = f"127.0.0.1:{free_port()}"
    rpc_a = f"tcp://127.0.0.1:{free_port()}"
    leader = daemon(*leader_args(tmp_path, rpc_a, repl, "--snapshot-every-records", "20",
                                 "--local-segment-size", str(64 << 20), mode="async"))
    standby = daemon(*standby_args(tmp_path, "standby", f"tcp://127.0.0.1:{free_port()}",
                                   repl))
    wait_for(lambda: ha(standby)["connected"], "the standby following")
    s = Store()
    s.setup("localhost", "", 0, 0, "tcp", "", rpc_a, timeout_ms=10000)
    for i in range(60):
        s.put(f"d{i}", b"v" * 512)
    wait_for(lambda: health_ha(leader)["snapshot_lsn"] > 0 and health_ha(leader)["log_bytes"] > 0,
             "a snapshot and its log size in /health")
    wait_for(lambda: ha(standby)["applied_lsn"] > 0 and ha(standby)["lag_records"] == 0,
             "the standby caught up")

    browser.get(f"http://127.0.0.1:{leader.port}/")
    wait_for(lambda: polls(browser) >= 2, "two polls")
    assert browser.find_element("id", "ha-section").is_displayed()
    f, want = shown(browser), health_ha(leader)
    assert f["role"][:2] == ["leader", "leader"], f["role"]
    assert f["term"][0] == str(want["term"])
    assert int(f["log_bytes"][0]) > 0 and "B" in f["log_bytes"][1]
    assert int(f["snapshot_lsn"][0]) > 0 and f["snapshot_age"][1].startswith("taken ")
    rows = browser.execute_script(
        "return [...document.querySelectorAll('#standbys tbody tr')].map(r =>"
        " [r.dataset.address, ...[...r.cells].slice(1).map(c => Number(c.dataset.value))]);")
    assert [r[0] for r in rows] == [x["address"] for x in want["standbys"]] and len(rows) == 1
    assert rows[0][2] >= 0 and rows[0][3] >= 0  # lag in records and ms, as /health says
    assert not f["lag_records"][2]  # a leader has no lag of its own: hidden

    browser.get(f"http://127.0.0.1:{standby.port}/")
    wait_for(lambda: polls(browser) >= 1, "a poll")
    f = shown(browser)
    assert f["role"][0] == "standby"
    assert f["lag_records"][2] and f["lag_records"][0] == str(health_ha(standby)["lag_records"])
    assert f["connected"][1] == "up"
    assert not browser.find_element("id", "standbys").is_displayed()
    s.close()


def test_no_ha_section_without_replication(daemon, browser):
    d = daemon()
    browser.get(f"http://127.0.0.1:{d.port}/")
    wait_for(lambda: polls(browser) >= 1, "a poll")
    assert not browser.find_element("id", "ha-section").is_displayed()
