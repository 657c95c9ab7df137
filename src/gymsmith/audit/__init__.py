"""Audits: the environments' own regression tests."""

from gymsmith.audit.check import CheckOutcome, check_family, check_history
from gymsmith.audit.replay import ReplayReport, replay

__all__ = ["CheckOutcome", "ReplayReport", "check_family", "check_history", "replay"]
