"""The tutorial (docs/tutorial.md) as a reader follows it: the page's own command blocks, in order, from an
empty folder (issues 42 and 77). Each ``bash`` block's lines are run as written: ``deltaflow ...`` in this
process, ``cd``, a ``cat > file <<'EOF'`` with the text the page shows, ``python produce.py``. The only
lines not run are the ones that run until stopped (``ui``, ``run --continuous``) and the broker's start
and stop: the session's broker stands in for ``deltaflow kafka start`` (``KAFKA_BOOTSTRAP``, as the page
says for a broker elsewhere). After each step the tables are read back with ``deltalake`` and compared with
what the page says they hold."""

from __future__ import annotations

import re
import runpy
import shlex
from pathlib import Path
from typing import Any

from deltalake import DeltaTable

from deltaflow.pipeline import Pipeline
from helpers import cli

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "tutorial.md"
#: Lines the test does not run, and why: each runs until stopped, or is the session's broker.
NOT_RUN = {"deltaflow ui": "runs until Ctrl-C", "deltaflow run --continuous --ui": "runs until Ctrl-C",
           "deltaflow kafka start": "the session's broker", "deltaflow kafka stop": "the session's broker"}


def steps() -> list[tuple[str, list[str]]]:
    """Each ``## N. title`` of the page with its bash blocks' lines (snippets included, comments kept)."""
    found: list[tuple[str, list[str]]] = []
    for section in re.split(r"^## ", PAGE.read_text(), flags=re.MULTILINE)[1:]:
        title = section.splitlines()[0]
        lines = [line for block in re.findall(r"^```bash\n(.*?)^```", section, re.MULTILINE | re.DOTALL)
                 for line in block.splitlines()]
        included = []
        for line in lines:
            snippet = re.fullmatch(r'--8<-- "([^"]+)"', line)
            included += (ROOT / snippet.group(1)).read_text().splitlines() if snippet else [line]
        found.append((title, included))
    return found


def run_lines(capsys: Any, monkeypatch: Any, lines: list[str]) -> list[str]:
    """Run ``lines`` as a shell would; the ``deltaflow`` outputs, in order."""
    outputs, skipped = [], []
    lines = list(lines)
    while lines:
        line = lines.pop(0)
        words = shlex.split(line, comments=True)
        if not words:
            continue
        command = " ".join(words)
        if command in NOT_RUN:
            skipped.append(command)
        elif words[0] == "cd":
            monkeypatch.chdir(words[1])
        elif words[:2] == ["cat", ">"] and words[3:] == ["<<EOF"]:
            end = lines.index("EOF")
            Path(words[2]).write_text("\n".join(lines[:end]) + "\n")
            del lines[:end + 1]
        elif words == ["python", "produce.py"]:
            runpy.run_path("produce.py")
        elif words[0] == "deltaflow":
            done = cli(capsys, *words[1:])
            assert done.returncode == 0, f"{line}: {done.stderr}"
            outputs.append(done.stdout + done.stderr)
        else:
            raise AssertionError(f"the tutorial runs '{line}', which its test does not know how to run")
    return outputs


def rows(table: str) -> list[dict[str, Any]]:
    """``table`` of the project in the working folder."""
    return DeltaTable(Pipeline.load(Path()).layout.table(table)).to_pyarrow_table().to_pylist()


def gold() -> dict[str, tuple[int, float]]:
    return {r["action"]: (r["events"], r["amount"]) for r in rows("gold_actions")}


def reasons() -> list[str]:
    return sorted(reason for r in rows("silver_events_quarantine") for reason in r["failed_expectations"])


def shown(output: str) -> dict[str, tuple[int, float]]:
    """gold_actions as ``deltaflow show gold_actions`` printed it (the table's rows)."""
    found = re.findall(r"^│ (\w+) +│ (\d+) +│ ([\d.]+) +│$", output, re.MULTILINE)
    return {action: (int(events), float(amount)) for action, events, amount in found}


def test_the_tutorial_runs_as_written(  # type: ignore[no-untyped-def]
        spark, tmp_path: Path, capsys, monkeypatch, kafka_bootstrap: str) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KAFKA_BOOTSTRAP", kafka_bootstrap)
    page = steps()
    assert [title.split(".")[0] for title, _ in page] == ["1", "2", "3", "4", "5", "6"]
    (_, new), (_, first_run), (_, new_input), (_, look), (_, kafka), (_, keep) = page

    run_lines(capsys, monkeypatch, new)
    assert Path.cwd() == tmp_path / "shop" and (Path("landing") / "events-0001.json").is_file()

    _, _, show = run_lines(capsys, monkeypatch, first_run)
    assert len(rows("bronze_events")) == 6 and len(rows("silver_events")) == 4
    assert reasons() == ["has_user"]
    assert gold() == {"view": (2, 0.0), "buy": (2, 62.49)} == shown(show)
    assert DeltaTable(Pipeline.load(Path()).layout.table("gold_actions")).version() == 1  # the page's

    ran, now, then = run_lines(capsys, monkeypatch, new_input)
    assert "1 duplicate dropped" in ran  # e1 again, as the page says
    assert gold() == {"view": (3, 0.0), "buy": (3, 72.49)} == shown(now)
    assert shown(then) == {"view": (2, 0.0), "buy": (2, 62.49)}

    status, buys, per_user, history, quarantine = run_lines(capsys, monkeypatch, look)
    assert "silver_events" in status and "gold_actions" in history and "has_user" in quarantine
    assert sorted(re.findall(r"│ (e\d) ", buys)) == sorted(r["event_id"] for r in rows("silver_events")
                                                            if r["action"] == "buy")
    users = {r["user_id"] for r in rows("silver_events")}
    assert len(re.findall(r"^│ u\d", per_user, re.MULTILINE)) == len(users)

    _, _, show, quarantine = run_lines(capsys, monkeypatch, kafka)
    assert Path.cwd() == tmp_path / "shop_kafka"
    assert gold() == {"view": (2, 0.0), "buy": (2, 62.49)} == shown(show)
    assert reasons() == ["has_user", "malformed_json"]
    assert "malformed_json" in quarantine

    assert run_lines(capsys, monkeypatch, keep) == []  # both lines run until stopped or are the broker's
