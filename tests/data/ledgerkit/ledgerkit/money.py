"""Amounts of money in cents."""


def parse_cents(text):
    """'12.34' -> 1234; '37' -> 3700; '5.5' -> 550."""
    whole, _, frac = text.partition(".")
    return int(whole) * 100 + int((frac + "00")[:2])


def line_total(qty, unit_cents):
    """What `qty` units at `unit_cents` each cost."""
    return qty * unit_cents


def order_total(lines):
    """The total of (qty, unit_cents) lines."""
    return sum(line_total(qty, price) for qty, price in lines)


def apply_discount(cents, percent):
    """`cents` less `percent` per cent, rounded in the customer's favour."""
    return cents - cents * percent // 100


def split_evenly(cents, ways):
    """`cents` split in `ways` parts that differ by at most one cent, the larger ones first."""
    base, extra = divmod(cents, ways)
    return [base + 1 if i < extra else base for i in range(ways)]
