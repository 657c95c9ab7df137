"""The environment protocol every family implements."""

from gymsmith.envs.base import Environment, FinalState, ToolEnvironment, ToolRefusal, error_observation

__all__ = ["Environment", "FinalState", "ToolEnvironment", "ToolRefusal", "error_observation"]
