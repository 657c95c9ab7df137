"""The built-in task families: `ops` (a back office), `code` (a repository with bugs), `web` (a web application).

Each is registered through the `gymsmith.families` entry points (pyproject.toml); nothing here is imported eagerly.
"""
