"""`gymsmith serve` and its client."""

from gymsmith.server.app import ServerSettings, create_app
from gymsmith.server.client import RemoteEnvironment, RemoteError

__all__ = ["RemoteEnvironment", "RemoteError", "ServerSettings", "create_app"]
