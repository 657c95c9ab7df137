"""Registered repositories: real, pinned open-source Python packages with their own test suites, from which
the `code` family synthesizes tasks (`source` knob). See docs/repos.md."""

from gymsmith.repos.build import add_repo
from gymsmith.repos.manifest import RepoError, RepoManifest, find_repo, list_repos, remove_repo, repos_dir

__all__ = ["RepoError", "RepoManifest", "add_repo", "find_repo", "list_repos", "remove_repo", "repos_dir"]
