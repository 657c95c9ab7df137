"""Agents: the protocol, generic scripted agents, and lookup by family."""

from gymsmith.agents.base import Agent, NullAgent, RandomAgent

__all__ = ["Agent", "NullAgent", "RandomAgent"]
