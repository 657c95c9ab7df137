"""The template library: small modules of real functionality, each with a reference and a test suite.

Each template is a pair of files here: `<name>.py` (the reference implementation) and `test_<name>.py`
(its full test suite, which imports `from <name> import ...`). These files are read as text by the
generator and the hidden checks; nothing of this folder is ever mounted into an agent's sandbox.
"""

from __future__ import annotations

from functools import lru_cache
from importlib.resources import files

TEMPLATES = ("csvparse", "dates", "graphs", "intervals", "ledger", "lru", "money", "ratelimit", "rle", "roman",
             "stats", "textwrap2", "tokenizer")


@lru_cache(maxsize=None)
def template_source(name: str) -> tuple[str, str]:
    """(reference module source, full test-suite source) of template `name`. Raises KeyError if unknown."""
    if name not in TEMPLATES:
        raise KeyError(f"unknown code template {name!r}; templates: {', '.join(TEMPLATES)}")
    here = files(__name__)
    return (here / f"{name}.py").read_text(), (here / f"test_{name}.py").read_text()
