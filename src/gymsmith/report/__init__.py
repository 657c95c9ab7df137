"""Reports: static HTML summaries of stored runs."""

from gymsmith.report.html import write_summary_html

__all__ = ["write_summary_html"]
