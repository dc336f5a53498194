"""crescent-bench --report: the page is self-contained (uPlot inlined from the
copy built into crescent, no other file or origin), its numbers are the run's
(--json of the same run), and headless Chromium draws both charts."""
import json
import re

import pytest

from conftest import binary, free_port
from test_dashboard import browser, wait_for  # noqa: F401 (the fixture)
import subprocess


def test_report_page_self_contained_with_charts(daemon, browser, tmp_path):  # noqa: F811
    rpc = f"tcp://127.0.0.1:{free_port()}"
    daemon("--rpc-address", rpc)
    page, doc_path = tmp_path / "out.html", tmp_path / "out.json"
    p = subprocess.run([binary("crescent-bench"), "--rpc", rpc, "--mount-fake", "--workload",
                        "mix", "--mix", "1:1:1:0", "--duration", "2", "--warmup", "0.2",
                        "--report", str(page), "--json", str(doc_path)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    html = page.read_text()
    doc = json.loads(doc_path.read_text())
    # Self-contained: nothing loaded from anywhere, the library inline.
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", html)
    assert "var uPlot=" in html, "no uPlot: run scripts/setup.sh (npm ci installs it), rebuild"
    embedded = re.search(r'<script type="application/json" id="data">(.*?)</script>', html, re.S)
    assert json.loads(embedded.group(1).replace("<\\/", "</")) == doc
    browser.get(page.as_uri())
    wait_for(lambda: len(browser.find_elements("css selector", ".uplot")) == 2,
             "both charts drawn")
    assert browser.execute_script(
        "return performance.getEntriesByType('resource').length;") == 0
    rows = browser.execute_script(
        "return [...document.querySelectorAll('#table tr')].map(r => r.cells[0].textContent);")
    assert rows == ["op", "get", "put", "exist", "all"]
    assert str(doc["operations"]) in browser.find_element("id", "setup").text
    assert browser.find_element("id", "nocharts").is_displayed() is False
