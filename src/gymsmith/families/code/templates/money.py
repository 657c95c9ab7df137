"""Money in integer cents: parsing, formatting, splitting and discounts."""


def parse_amount(text):
    text = text.strip().replace(",", "")
    negative = text.startswith("-")
    if negative:
        text = text[1:]
    whole, _, frac = text.partition(".")
    if len(frac) > 2 or not (whole or frac):
        raise ValueError(f"not an amount: {text!r}")
    cents = int(whole or "0") * 100 + int((frac + "00")[:2])
    return -cents if negative else cents


def format_cents(cents, symbol="$"):
    sign = "-" if cents < 0 else ""
    cents = abs(cents)
    return f"{sign}{symbol}{cents // 100:,}.{cents % 100:02d}"


def split_evenly(total, parts):
    if parts <= 0:
        raise ValueError("parts must be positive")
    base, remainder = divmod(total, parts)
    return [base + 1 if i < remainder else base for i in range(parts)]


def apply_discount(cents, percent):
    if percent < 0 or percent > 100:
        raise ValueError("percent must be within 0..100")
    return cents - (cents * percent + 50) // 100


def total_with_tax(items, rate_percent=0):
    subtotal = sum(items)
    return subtotal + (subtotal * rate_percent + 50) // 100
