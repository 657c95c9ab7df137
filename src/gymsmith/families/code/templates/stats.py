"""Descriptive statistics on lists of numbers."""


def mean(values):
    if not values:
        raise ValueError("mean of empty data")
    return sum(values) / len(values)


def median(values):
    ordered = sorted(values)
    n = len(ordered)
    if n == 0:
        raise ValueError("median of empty data")
    mid = n // 2
    if n % 2 == 1:
        return ordered[mid]
    return (ordered[mid - 1] + ordered[mid]) / 2


def mode(values):
    counts = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    best = max(counts.values())
    return min(v for v, c in counts.items() if c == best)


def variance(values, sample=True):
    m = mean(values)
    denominator = len(values) - 1 if sample else len(values)
    if denominator <= 0:
        raise ValueError("not enough data")
    return sum((v - m) ** 2 for v in values) / denominator


def percentile(values, p):
    if not 0 <= p <= 100:
        raise ValueError("p must be within 0..100")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)
