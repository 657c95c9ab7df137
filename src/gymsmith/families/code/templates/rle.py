"""Run-length encoding of strings, e.g. 'aaabcc' <-> '3a1b2c'."""


def runs(text):
    out = []
    i = 0
    while i < len(text):
        j = i
        while j < len(text) and text[j] == text[i]:
            j += 1
        out.append((text[i], j - i))
        i = j
    return out


def encode(text, max_run=9):
    parts = []
    for ch, count in runs(text):
        while count > max_run:
            parts.append(f"{max_run}{ch}")
            count -= max_run
        parts.append(f"{count}{ch}")
    return "".join(parts)


def decode(code):
    out, digits = [], ""
    for ch in code:
        if ch.isdigit():
            digits += ch
        else:
            if not digits:
                raise ValueError(f"missing count before {ch!r}")
            out.append(ch * int(digits))
            digits = ""
    if digits:
        raise ValueError("dangling count")
    return "".join(out)


def compression_ratio(text):
    if not text:
        return 1.0
    return len(encode(text)) / len(text)
