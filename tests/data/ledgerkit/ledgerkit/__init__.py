"""A small ledger library: the registered-package tests' own package (tests/test_code_repos.py)."""
