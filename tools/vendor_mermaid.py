"""Put Mermaid's script into the documentation site, so that its diagrams draw offline.

The theme would fetch Mermaid from a CDN when a page holds a diagram; with ``docs/javascripts/mermaid.min.js``
listed in ``mkdocs.yml``'s ``extra_javascript`` it uses that one instead. The script comes from Maven Central
(the WebJar of the npm package) through ``mvn``, like the project's JVM jars; ``make setup`` runs this once.

    .venv/bin/python tools/vendor_mermaid.py [--force]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

VERSION = "11.6.0"
ARTIFACT = f"org.webjars.npm:mermaid:{VERSION}"
TARGET = Path(__file__).resolve().parents[1] / "docs" / "javascripts" / "mermaid.min.js"


def vendor(force: bool = False) -> Path:
    """Write :data:`TARGET` from Mermaid's WebJar (nothing to do when it is there, unless ``force``)."""
    if TARGET.exists() and not force:
        return TARGET
    mvn = shutil.which("mvn")
    if mvn is None:
        sys.exit("vendor_mermaid: mvn (Maven) not found")
    with tempfile.TemporaryDirectory() as folder:
        command = [mvn, "-q", "dependency:copy", f"-Dartifact={ARTIFACT}", f"-DoutputDirectory={folder}"]
        copied = subprocess.run(command, capture_output=True, text=True)
        if copied.returncode != 0:
            sys.exit(f"vendor_mermaid: no {ARTIFACT}: {(copied.stdout + copied.stderr)[-800:]}")
        with zipfile.ZipFile(next(Path(folder).glob("*.jar"))) as jar:
            script = jar.read(f"META-INF/resources/webjars/mermaid/{VERSION}/dist/mermaid.min.js")
    TARGET.parent.mkdir(parents=True, exist_ok=True)
    TARGET.write_bytes(script)
    return TARGET


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="fetch and write it again")
    print(f"mermaid {VERSION}: {vendor(parser.parse_args().force)}")
