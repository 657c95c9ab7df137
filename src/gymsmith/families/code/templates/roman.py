"""Roman numerals from 1 to 3999."""

VALUES = ((1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
          (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"))
SYMBOLS = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}


def to_roman(n):
    if n < 1 or n > 3999:
        raise ValueError(f"out of range: {n}")
    out = []
    for value, symbol in VALUES:
        while n >= value:
            out.append(symbol)
            n -= value
    return "".join(out)


def from_roman(text):
    total, previous = 0, 0
    for ch in reversed(text.upper()):
        value = SYMBOLS[ch]
        if value < previous:
            total -= value
        else:
            total += value
            previous = value
    return total


def is_canonical(text):
    try:
        return to_roman(from_roman(text)) == text.upper()
    except (KeyError, ValueError):
        return False
