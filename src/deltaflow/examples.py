"""The example pipelines shipped with deltaflow: where they are, and their names.

A wheel carries them in the package (``deltaflow/examples``); a checkout has them in ``examples/``;
``$DELTAFLOW_EXAMPLES`` points elsewhere.

Examples:
    >>> "clickstream" in example_names()
    True

"""

from __future__ import annotations

import os
from pathlib import Path

from deltaflow.errors import ArgumentError

_PACKAGED = Path(__file__).resolve().parent / "examples"
EXAMPLES = Path(os.environ.get("DELTAFLOW_EXAMPLES") or (
    _PACKAGED if _PACKAGED.is_dir() else Path(__file__).resolve().parents[2] / "examples"))


def example_names() -> list[str]:
    """The shipped examples, by name."""
    from deltaflow.spec import SPEC_NAMES

    found = EXAMPLES.iterdir() if EXAMPLES.is_dir() else iter(())
    return sorted(p.name for p in found if any((p / name).is_file() for name in SPEC_NAMES))


def example_path(name: str) -> Path:
    """The folder of shipped example ``name``.

    Raises:
        ArgumentError: No such example (naming the ones there are).

    """
    if name not in example_names():
        raise ArgumentError(f"example '{name}' not found", location=str(EXAMPLES / name),
                            hint=f"examples: {', '.join(example_names()) or 'none here'}; a checkout has "
                            "them, or set DELTAFLOW_EXAMPLES")
    return EXAMPLES / name
