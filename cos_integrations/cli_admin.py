"""Admin commands of the ``cos`` CLI (registered on import by :mod:`cos_integrations.cli`)."""

from __future__ import annotations
