"""``python -m deltaflow`` is the ``deltaflow`` command."""

from deltaflow.cli.main import main

main()
