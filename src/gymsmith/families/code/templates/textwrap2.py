"""Greedy word wrapping, justification and centring of plain text."""


def split_words(text):
    return [w for w in text.split() if w]


def wrap(text, width=20):
    if width < 1:
        raise ValueError("width must be positive")
    lines, current = [], []
    length = 0
    for word in split_words(text):
        extra = len(word) if not current else len(word) + 1
        if current and length + extra > width:
            lines.append(" ".join(current))
            current, length = [word], len(word)
        else:
            current.append(word)
            length += extra
    if current:
        lines.append(" ".join(current))
    return lines


def justify_line(line, width):
    words = line.split()
    if len(words) < 2:
        return line.ljust(width)
    gaps = len(words) - 1
    spaces = width - sum(len(w) for w in words)
    out = ""
    for i, word in enumerate(words[:-1]):
        out += word + " " * (spaces // gaps + (1 if i < spaces % gaps else 0))
    return out + words[-1]


def justify(text, width=20):
    lines = wrap(text, width)
    return [justify_line(line, width) for line in lines[:-1]] + lines[-1:]


def center(line, width):
    pad = max(0, width - len(line))
    left = pad // 2
    return " " * left + line + " " * (pad - left)
