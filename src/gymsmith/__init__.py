"""gymsmith: build, run and audit verifiable RL environments for LLM agents."""

from importlib.metadata import PackageNotFoundError, version as _version

try:
    __version__ = _version("gymsmith")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+source"

__all__ = ["__version__"]
