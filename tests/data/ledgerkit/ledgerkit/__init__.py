"""A small ledger library: the registered-package tests' own package (tests/test_code_repos.py)."""

import pkgutil

# package data read at import, as many packages do: registration, the agent's sandbox and the verifier must carry it
__version__ = (pkgutil.get_data(__name__, "VERSION") or b"").decode().strip()
