"""Closed integer intervals: merging, insertion and coverage."""


def normalize(interval):
    start, end = interval
    if start > end:
        start, end = end, start
    return (start, end)


def overlaps(a, b):
    a, b = normalize(a), normalize(b)
    return a[0] <= b[1] and b[0] <= a[1]


def merge_intervals(intervals):
    ordered = sorted(normalize(i) for i in intervals)
    merged = []
    for start, end in ordered:
        if merged and start <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def insert_interval(intervals, new):
    return merge_intervals(list(intervals) + [new])


def total_covered(intervals):
    total = 0
    for start, end in merge_intervals(intervals):
        total += end - start + 1
    return total
