"""``python -m dealtrail.cli``: the ``dealtrail`` command."""

from dealtrail.cli import main

main()
