"""Audits: the environments' own regression tests."""

from gymsmith.audit.check import CheckOutcome, check_family, check_history

__all__ = ["CheckOutcome", "check_family", "check_history"]
