"""A small CSV reader: quoted fields, escaped quotes, headers and columns."""


def parse_line(line, sep=","):
    fields, field, quoted, i = [], [], False, 0
    while i < len(line):
        ch = line[i]
        if quoted:
            if ch == '"' and i + 1 < len(line) and line[i + 1] == '"':
                field.append('"')
                i += 1
            elif ch == '"':
                quoted = False
            else:
                field.append(ch)
        elif ch == '"':
            quoted = True
        elif ch == sep:
            fields.append("".join(field))
            field = []
        else:
            field.append(ch)
        i += 1
    if quoted:
        raise ValueError("unterminated quote")
    fields.append("".join(field))
    return fields


def parse_rows(text, sep=","):
    return [parse_line(line, sep) for line in text.splitlines() if line.strip()]


def read_records(text, sep=","):
    rows = parse_rows(text, sep)
    if not rows:
        return []
    header = rows[0]
    return [dict(zip(header, row)) for row in rows[1:]]


def column(text, name, sep=","):
    return [record.get(name, "") for record in read_records(text, sep)]
