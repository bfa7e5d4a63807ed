"""``python -m deltaflow`` is the ``deltaflow`` command."""

from deltaflow.cli import main

main()
