"""The package version, in a module of its own so that modules of the package can read it
without importing the package (no import cycle)."""

__version__ = "0.3.0"
