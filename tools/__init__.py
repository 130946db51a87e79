"""Developer tools run by tox (not installed)."""
