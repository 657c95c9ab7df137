"""Summaries of amounts."""


def mean_cents(values):
    """The mean, rounded down."""
    return sum(values) // len(values)


def spread(values):
    """The largest less the smallest."""
    return max(values) - min(values)


def median_cents(values):
    """The median; of an even count, the mean of the middle two rounded down."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[mid]
    return (ordered[mid - 1] + ordered[mid]) // 2


def summary(values):
    """(mean, median, spread)."""
    return mean_cents(values), median_cents(values), spread(values)
