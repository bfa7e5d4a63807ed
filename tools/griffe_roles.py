"""A Griffe extension for the API reference: Sphinx roles in docstrings shown as code.

The docstrings name other objects as ``:func:`~deltaflow.sinks.cdc.cdc_flow``` (what IDEs and Sphinx read);
mkdocstrings would print the role as it is. Each one becomes the object's name in backticks (the last
part with ``~``, as Sphinx shows it). ``mkdocs.yml`` loads it for the Python handler.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:func|meth|class|mod|data|attr|exc|obj):`(~?)([^`]+)`")


def plain(text: str) -> str:
    """``text`` with each Sphinx role as code: ``:func:`~a.b``` -> ```b```.

    Examples:
        >>> plain("see :func:`~deltaflow.define.datasets.table` and :class:`deltaflow.pipeline.Pipeline`")
        'see `table` and `deltaflow.pipeline.Pipeline`'

    """
    return ROLE.sub(lambda m: f"`{m.group(2).split('.')[-1] if m.group(1) else m.group(2)}`", text)


class SphinxRoles(griffe.Extension):
    """Rewrites the roles of every docstring Griffe loads."""

    def on_instance(self, *, obj: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = plain(obj.docstring.value)
