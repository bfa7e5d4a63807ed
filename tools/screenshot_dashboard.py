"""The documentation's picture of the dashboard (``docs/dashboard.png``), taken from a clean demo run.

Runs ``deltaflow demo --example clickstream`` (its own broker, generated clicks, the dashboard) in a fresh
folder, waits until every flow has committed a few batches, and saves headless Chromium's view of the page.

    .venv/bin/python tools/screenshot_dashboard.py [--seconds 90] [--out docs/dashboard.png]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def batches(url: str) -> int:
    """The fewest batches any flow of the dashboard at ``url`` has committed (0 before each has one)."""
    with urllib.request.urlopen(f"{url}api/state", timeout=10) as answer:
        flows = json.load(answer).get("flows") or []
    return min((int(f.get("last_batch") or 0) for f in flows), default=0) if len(flows) >= 3 else 0


def screenshot(out: Path, seconds: int) -> None:
    """Run the demo (for at most ``seconds``) and save the dashboard once every flow has a few batches."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    folder = Path(tempfile.gettempdir()) / "deltaflow-demo"  # the path the page shows
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    try:
        deltaflow = str(Path(sys.executable).parent / "deltaflow")
        demo = subprocess.Popen([deltaflow, "demo", "--example", "clickstream", "--seconds", str(seconds)],
                                cwd=folder,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert demo.stdout is not None
        url = None
        for line in demo.stdout:
            if match := re.search(r"dashboard: (http://\S+)", line):
                url = match.group(1)
                break
        if url is None:
            sys.exit("screenshot_dashboard: the demo printed no dashboard address")
        deadline = time.monotonic() + seconds - 10
        while batches(url) < 5 and time.monotonic() < deadline:
            time.sleep(2)
        options = webdriver.ChromeOptions()
        options.binary_location = str(shutil.which("chromium"))
        for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
            options.add_argument(flag)
        browser = webdriver.Chrome(service=Service(str(shutil.which("chromedriver"))), options=options)
        try:
            browser.get(url)
            time.sleep(3)  # the page's first refresh
            browser.save_screenshot(str(out))
        finally:
            browser.quit()
            demo.send_signal(signal.SIGINT)
            demo.wait(timeout=120)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"wrote {out}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=240, help="how long the demo may run")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "dashboard.png")
    arguments = parser.parse_args()
    screenshot(arguments.out, arguments.seconds)
