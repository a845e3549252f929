"""How nodes come up. The registry by name and `auto` is registry.py; catalog.py names every backend and its
options without importing any (what the CLI reads to start fast)."""
