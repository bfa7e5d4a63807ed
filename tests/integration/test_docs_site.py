"""The documentation site as a reader sees it (issue 42): built strictly, opened in headless Chromium, the
tutorial page shows the files it includes and the navigation reaches the generated reference. A screenshot
of the tutorial page goes to ``$DELTAFLOW_TEST_ARTIFACTS`` (default ``test-artifacts/``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("DELTAFLOW_TEST_ARTIFACTS", "test-artifacts"))
STARTER = ROOT / "src" / "deltaflow" / "templates" / "starter"


def test_the_built_site_shows_the_tutorial_with_its_files_and_the_reference(
        browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    site = tmp_path / "site"
    built = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir",
                            str(site)], cwd=ROOT, capture_output=True, text=True,
                           env={**os.environ, "NO_MKDOCS_2_WARNING": "1", "DISABLE_MKDOCS_2_WARNING": "true"})
    assert built.returncode == 0, built.stderr[-3000:]

    browser.get((site / "tutorial" / "index.html").as_uri())
    assert browser.find_element(By.TAG_NAME, "h1").text == "Tutorial"
    code = "\n".join(block.text for block in browser.find_elements(By.CSS_SELECTOR, "pre code"))
    for line in ("name: shop", "def silver_events():", "@dp.expect_or_quarantine(\"has_user\""):
        assert line in code, f"the tutorial page does not show {line!r}"
    assert (STARTER / "transformations" / "pipeline.py").read_text().splitlines()[0] in code
    links = {a.text.strip() for a in browser.find_elements(By.CSS_SELECTOR, "nav a") if a.text.strip()}
    assert {"Command line", "deltaflow.yml", "Python API", "Error codes", "Metrics"} <= links, links
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / "docs-tutorial.png"))

    browser.execute_cdp_cmd("Network.enable", {})  # the site reads offline: no request leaves the machine
    browser.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["http://*", "https://*"]})
    try:
        browser.get((site / "concepts" / "index.html").as_uri())
        WebDriverWait(browser, 20).until(lambda b: b.find_elements(By.CSS_SELECTOR, "div.mermaid"))
        drawn = browser.find_elements(By.CSS_SELECTOR, "div.mermaid")
        assert not browser.find_elements(By.CSS_SELECTOR, "pre.mermaid")  # each diagram drawn, none as text
        assert all(d.size["height"] > 50 for d in drawn), [d.size for d in drawn]
        assert browser.execute_script("return typeof mermaid") == "object"
    finally:
        browser.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})

    api = (site / "reference" / "api" / "index.html").read_text()
    for raw in (":func:", ":meth:", ":class:", "doctest: +SKIP", "<blockquote>"):
        assert raw not in api, f"the API page shows {raw!r}"  # roles as code, examples as code blocks
    assert api.count('<span class="gp">&gt;&gt;&gt; </span>') > 20

    browser.get((site / "reference" / "spec" / "index.html").as_uri())
    keys = browser.find_elements(By.CSS_SELECTOR, "article table td:first-child code")
    assert len(keys) > 20
    lines = "return arguments[0].getClientRects().length"  # a code element broken across lines has two
    broken = [k.text for k in keys if browser.execute_script(lines, k) > 1]
    assert not broken, f"key names broken across lines: {broken}"

    browser.get((site / "reference" / "cli" / "index.html").as_uri())
    text = browser.find_element(By.TAG_NAME, "article").text
    assert "deltaflow init" in text and "--full-refresh" in text
