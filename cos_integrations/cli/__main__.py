"""``python -m cos_integrations.cli``: the ``cos`` command."""

from cos_integrations.cli import main

main()
