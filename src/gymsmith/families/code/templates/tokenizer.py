"""A tokenizer for arithmetic expressions: numbers, names, operators and parentheses."""

OPERATORS = "+-*/%^"


def is_name_char(ch, first=False):
    if ch.isalpha() or ch == "_":
        return True
    return not first and ch.isdigit()


def read_number(text, i):
    start = i
    seen_dot = False
    while i < len(text) and (text[i].isdigit() or (text[i] == "." and not seen_dot)):
        if text[i] == ".":
            seen_dot = True
        i += 1
    return text[start:i], i


def tokenize(text):
    tokens = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if ch.isdigit():
            number, i = read_number(text, i)
            tokens.append(("NUM", number))
        elif is_name_char(ch, first=True):
            start = i
            while i < len(text) and is_name_char(text[i]):
                i += 1
            tokens.append(("NAME", text[start:i]))
        elif ch in OPERATORS:
            tokens.append(("OP", ch))
            i += 1
        elif ch in "()":
            tokens.append(("PAREN", ch))
            i += 1
        else:
            raise ValueError(f"unexpected character {ch!r} at {i}")
    return tokens


def is_balanced(text):
    depth = 0
    for kind, value in tokenize(text):
        if kind == "PAREN":
            depth += 1 if value == "(" else -1
            if depth < 0:
                return False
    return depth == 0


def count_kind(text, kind):
    return sum(1 for k, _ in tokenize(text) if k == kind)
