"""``python -m cos_integrations.cli``: the ``cos`` command."""

from . import main

main()
