"""Put the benchmark report's pictures beside the page that includes the report (``docs/report.md``).

``mkdocs build`` runs this through mkdocs-gen-files: the report (``benchmarks/REPORT.md``) names its charts
relative to ``benchmarks/``; the site serves them next to ``report.md``.
"""

from __future__ import annotations

import re
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def pictures() -> list[Path]:
    """The pictures ``REPORT.md`` shows."""
    text = (BENCHMARKS / "REPORT.md").read_text()
    return [BENCHMARKS / name for name in re.findall(r"!\[[^\]]*\]\(([^)#]+)\)", text)]


if __name__ == "<run_path>":
    import mkdocs_gen_files

    for picture in pictures():
        with mkdocs_gen_files.open(picture.name, "wb") as out:
            out.write(picture.read_bytes())
