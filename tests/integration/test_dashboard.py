"""The dashboard at GET / in a real browser: Debian's headless Chromium, driven
by chromedriver through python3-selenium, loads the page from a running
crescentd, and every number it shows equals the API's; the page fetches
nothing from anywhere but crescentd.  A screenshot is saved (to
$CRESCENT_DASHBOARD_SCREENSHOT when set, e.g. docs/dashboard.png)."""
import json
import os
import shutil
import subprocess
import time
import urllib.request

import pytest

from conftest import binary, http_get

webdriver = pytest.importorskip("selenium.webdriver", reason="python3-selenium (scripts/setup.sh)")
CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
CLIENT = "6f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f"


def ctl(d, *args):
    rpc = d.args[d.args.index("--rpc-address") + 1]
    subprocess.run([binary("crescentctl"), "--rpc", rpc, "--timeout-ms", "10000", *args],
                   check=True, capture_output=True, env={"CRESCENT_CLIENT_ID": CLIENT})


def post(d, path, body):
    req = urllib.request.Request(f"http://127.0.0.1:{d.port}{path}",
                                 data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def api(d, path):
    status, body = http_get(d.port, path)
    assert status == 200, (path, body)
    return json.loads(body)


def populate(d):
    ctl(d, "mount", "seg0", "1G", "--endpoint", "10.0.0.5:12345")
    ctl(d, "mount", "seg1", "256M", "--endpoint", "10.0.0.6:12345", "--base", "0x100000000")
    for i in range(5):
        ctl(d, "put-start", f"prompt-{i}", f"{(i + 1) * 64}K", "--replicas", "2")
        ctl(d, "put-end", f"prompt-{i}")
    ctl(d, "replicas", "prompt-0")  # takes a read lease
    post(d, "/register", {"instance_id": "vllm-0", "endpoint": "tcp://10.0.0.7:5557",
                          "type": "vLLM", "modelname": "llama-3-8b", "block_size": 16})
    post(d, "/load", {"instance_id": "vllm-0", "kv_active_blocks": 100, "kv_total_blocks": 1000})
    # The publisher never connects (no engine here): route to it all the same.
    post(d, "/route", {"model": "llama-3-8b", "block_size": 16, "token_ids": list(range(64)),
                       "include_unhealthy": True})


@pytest.fixture
def browser(tmp_path):
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip("chromium and chromium-driver are not installed (scripts/setup.sh)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
                 f"--user-data-dir={tmp_path / 'chromium'}", "--window-size=1400,1300"):
        options.add_argument(flag)
    from selenium.webdriver.chrome.service import Service  # selenium 4.8 (bookworm)
    service = Service(executable_path=CHROMEDRIVER)
    driver = webdriver.Chrome(options=options, service=service)
    yield driver
    driver.quit()


def wait_for(condition, what, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, f"{what} within {timeout} s"
        time.sleep(0.2)


def shown_fields(driver):
    return driver.execute_script(
        "const o = {};"
        "for (const el of document.querySelectorAll('[data-field]'))"
        "  o[el.dataset.field] = [el.dataset.value, el.textContent];"
        "return o;")


def test_dashboard_shows_the_apis_numbers(daemon, browser, tmp_path):
    d = daemon("--client-ttl", "600")
    populate(d)
    origin = f"http://127.0.0.1:{d.port}"
    browser.get(origin + "/")
    # Two polls: rates need two samples; nothing changes meanwhile.
    wait_for(lambda: int(browser.execute_script("return document.body.dataset.polls || 0")) >= 2,
             "two polls of the API")
    fields = shown_fields(browser)
    assert browser.find_element("id", "error").get_attribute("hidden") is not None, \
        browser.find_element("id", "error").text
    actors = {a["name"]: a.get("counters", {}) for a in api(d, "/api/v1/actors")["actors"]}
    stats = api(d, "/api/v1/stats")
    model = {"stats": stats, "events": api(d, "/api/v1/events"),
             "index": api(d, "/global_view"), "rpc": actors["rpc"],
             "tasks": api(d, "/api/v1/tasks"),
             # no metadata-only segment here: the memory is every segment's
             "capacity": {"memory": stats["capacity_bytes"], "used": stats["used_bytes"],
                          "ratio": stats["usage_ratio"], "metadata_only": 0}}
    checked = 0
    for field, (value, text) in fields.items():
        section, _, rest = field.partition(".")
        if section == "rate":
            assert float(value) == 0.0, (field, value)  # a quiet store between the polls
            continue
        expected = model[section]
        for part in rest.split("."):
            expected = expected[part]
        if expected is None:  # a read latency quantile of a tier without reads
            assert (value, text) == ("", "–"), (field, value, text)
            continue
        assert float(value) == pytest.approx(float(expected)), (field, value, expected)
        if field == "capacity.metadata_only":
            continue  # shown only beside a metadata-only segment
        if field == "index.route.hit_rate" and model["index"]["blocks"] == 0:
            assert text == "–", text  # no block indexed: no rate, not 0 % or 100 %
            continue
        assert text not in ("", "–"), field
        checked += 1
    assert checked >= 15
    assert fields["stats.objects"] == ["5", "5"]
    assert fields["stats.segments"][0] == "2"
    assert fields["capacity.memory"][1] == "1.25 GiB"
    assert fields["index.route.requests"][0] == "1"

    rows = browser.execute_script(
        "return [...document.querySelectorAll('#segments tbody tr')].map(r =>"
        " [r.dataset.name, ...[...r.cells].slice(3, 5).map(c => Number(c.dataset.value))]);")
    segments = api(d, "/api/v1/segments")["segments"]
    assert sorted(rows) == sorted([s["name"], s["size"], s["used_bytes"]] for s in segments)
    publishers = browser.execute_script(
        "return [...document.querySelectorAll('#publishers tbody tr')].map(r =>"
        " [r.dataset.key, r.cells[4].dataset.link]);")
    assert publishers == [[s["key"], s["link"]] for s in api(d, "/services")["services"]]
    objects = browser.execute_script(
        "return document.querySelectorAll('#objects tbody tr').length;")
    assert objects == 5
    assert browser.find_element("id", "tasks-section").is_displayed()
    assert fields["tasks.in_flight"][0] == str(model["tasks"]["in_flight"])

    # Everything came from crescentd: no other origin, no CDN.
    urls = browser.execute_script(
        "return performance.getEntriesByType('resource').map(e => e.name);")
    assert urls and all(u.startswith(origin + "/") for u in urls), urls
    assert any(u.endswith("/dashboard/uPlot.iife.min.js") for u in urls)
    # The charts drew (a build without uPlot, npm ci not run, has none).
    assert len(browser.find_elements("css selector", ".uplot")) == 3, \
        "no uPlot charts: run scripts/setup.sh (npm ci installs uPlot) and rebuild"

    shot = tmp_path / "dashboard.png"
    browser.save_screenshot(str(shot))
    assert shot.stat().st_size > 10000
    target = os.environ.get("CRESCENT_DASHBOARD_SCREENSHOT")
    if target:
        shutil.copyfile(shot, target)


def test_dashboard_assets_are_embedded(daemon):
    d = daemon()
    for path, kind in (("/", "text/html"), ("/dashboard/app.js", "text/javascript"),
                       ("/dashboard/uPlot.iife.min.js", "text/javascript"),
                       ("/dashboard/uPlot.min.css", "text/css")):
        with urllib.request.urlopen(f"http://127.0.0.1:{d.port}{path}", timeout=10) as r:
            assert r.status == 200 and r.headers["Content-Type"].startswith(kind), path
            assert len(r.read()) > 1000, path
    assert http_get(d.port, "/dashboard/nothing")[0] == 404


def test_dashboard_with_admin_token(daemon, browser, tmp_path):
    """With --admin-token-file the page still shows everything (it only reads);
    given #token=, it sends the token, and the token leaves the address bar."""
    token = "dashboard-test-token-0123456789"
    path = tmp_path / "admin.token"
    path.write_text(token + "\n")
    d = daemon("--admin-token-file", str(path))
    origin = f"http://127.0.0.1:{d.port}"
    browser.get(origin + "/#token=" + token)
    wait_for(lambda: int(browser.execute_script("return document.body.dataset.polls || 0")) >= 1,
             "a poll of the API")
    assert browser.find_element("id", "error").get_attribute("hidden") is not None, \
        browser.find_element("id", "error").text
    assert browser.execute_script("return location.hash") == ""
    assert browser.execute_script("return sessionStorage.getItem('crescent-token')") == token
    fields = shown_fields(browser)
    assert fields["stats.objects"][0] == str(api(d, "/api/v1/stats")["objects"])


def test_route_hit_rate_without_routes_is_not_a_number(daemon, browser):
    """No route asked yet: the card shows "–", not 0.0 % (nor 100 % with no
    block indexed)."""
    d = daemon()
    browser.get(f"http://127.0.0.1:{d.port}/")
    wait_for(lambda: int(browser.execute_script("return document.body.dataset.polls || 0")) >= 1,
             "a poll of the API")
    fields = shown_fields(browser)
    assert fields["index.route.requests"][1] == "0"
    assert fields["index.route.hit_rate"][1] == "–", fields["index.route.hit_rate"]
    assert "rate.exists" in fields and "rate.removes" in fields
    if browser.execute_script("return document.body.dataset.polls") == "1":
        assert fields["rate.puts"][1] == "–"  # one sample makes no rate, not a 0


def test_recent_objects_first_and_metadata_only_segments_marked(daemon, browser):
    """"Recent objects" lists the last put first (not the first keys of the
    table), and a segment mounted for metadata only (crescent-bench
    --mount-fake's protocol "none") is marked and not counted as capacity."""
    d = daemon("--client-ttl", "600")
    ctl(d, "mount", "seg0", "1G", "--endpoint", "10.0.0.5:12345")
    ctl(d, "mount", "fake0", "4G", "--endpoint", "127.0.0.1:9", "--base", "0x400000000000",
        "--protocol", "none")
    keys = ["zeta", "alpha", "mu", "beta"]
    for key in keys:
        ctl(d, "put-start", key, "64K", "--preferred", "seg0")
        ctl(d, "put-end", key)
    ctl(d, "put-start", "omega", "1M", "--preferred", "fake0")
    ctl(d, "put-end", "omega")
    ctl(d, "rm", "alpha")
    recent = api(d, "/api/v1/objects?order=recent&limit=3")
    assert [o["key"] for o in recent["objects"]] == ["omega", "beta", "mu"]
    assert http_get(d.port, "/api/v1/objects?order=newest")[0] == 400
    browser.get(f"http://127.0.0.1:{d.port}/")
    wait_for(lambda: int(browser.execute_script("return document.body.dataset.polls || 0")) >= 1,
             "a poll of the API")
    shown = browser.execute_script(
        "return [...document.querySelectorAll('#objects tbody tr')].map(r => r.cells[1].textContent);")
    assert shown == ["omega", "beta", "mu", "zeta"]
    marks = browser.execute_script(
        "return [...document.querySelectorAll('#segments tbody tr')].map(r =>"
        " [r.dataset.name, r.cells[2].dataset.fake, r.cells[2].textContent]);")
    assert sorted(marks) == [["fake0", "true", "none (metadata only, not capacity)"],
                             ["seg0", "false", "tcp"]]
    fields = shown_fields(browser)
    assert fields["capacity.memory"][1] == "1.00 GiB", fields["capacity.memory"]
    assert float(fields["capacity.used"][0]) == 4 * 64 * 1024 - 64 * 1024
    assert fields["capacity.metadata_only"][1] == "4.00 GiB"
    assert browser.find_element("id", "metadata-only").is_displayed()


def test_first_poll_draws_no_false_zeros_and_a_present_time_axis(daemon, browser):
    """One sample makes no rate: the first poll shows "–" for every rate (no
    0), and the charts' time axis is around now, not years away."""
    d = daemon()
    browser.get(f"http://127.0.0.1:{d.port}/")
    wait_for(lambda: int(browser.execute_script("return document.body.dataset.polls || 0")) >= 1,
             "a poll of the API")
    fields = shown_fields(browser)
    rates = {k: v for k, v in fields.items() if k.startswith("rate.")}
    assert {"rate.puts", "rate.gets", "rate.exists", "rate.removes"} <= set(rates)
    if int(browser.execute_script("return document.body.dataset.polls")) == 1:
        assert all(text == "–" for _, text in rates.values()), rates
    labels = browser.execute_script(
        "return [...document.querySelectorAll('.uplot .u-axis')].map(a => a.textContent);")
    year = time.gmtime().tm_year
    for text in labels:
        for other in (str(year + 1), str(year + 2), str(year + 3)):
            assert other not in text, labels


def test_read_latency_per_tier_from_the_clients_pings(daemon, browser):
    """A client's reads reach crescentd with its Ping (the client measures
    them: it reads the replicas itself) and show on the dashboard's tier card
    as /api/v1/stats has them; the tiers without reads show "–"."""
    import sys
    from conftest import BIN_DIR
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
    os.environ.setdefault("CRESCENT_LIB", os.path.join(BIN_DIR, "..", "lib", "libcrescent.so"))
    from crescent import Store  # noqa: E402
    d = daemon("--local-segment-size", "64M")
    rpc = d.args[d.args.index("--rpc-address") + 1]
    st = Store()
    assert st.setup("localhost", "", 0, 0, "tcp", "", rpc) == 0
    for i in range(6):
        assert st.put(f"k{i}", os.urandom(65536)) == 0
    for i in range(6):
        assert len(st.get(f"k{i}")) == 65536
    st.ping()  # carries the six reads
    st.close()
    reads = api(d, "/api/v1/stats")["read_latency"]
    assert reads["memory"]["count"] == 6 and reads["disk"]["count"] == 0
    assert reads["memory"]["p50_seconds"] > 0 and reads["disk"]["p50_seconds"] is None
    browser.get(f"http://127.0.0.1:{d.port}/")
    wait_for(lambda: int(browser.execute_script("return document.body.dataset.polls || 0")) >= 1,
             "a poll of the API")
    fields = shown_fields(browser)
    p50 = fields["stats.read_latency.memory.p50_seconds"]
    assert float(p50[0]) == pytest.approx(reads["memory"]["p50_seconds"]), p50
    assert p50[1].startswith("≤ ") and p50[1].endswith(("µs", "ms", " s")), p50
    assert fields["stats.read_latency.memory.count"] == ["6", "6"]
    assert fields["stats.read_latency.disk.p50_seconds"] == ["", "–"]
    assert browser.find_element("id", "read-latency").is_displayed()
