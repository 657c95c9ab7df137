"""Short codes for numbers: a salted, reversible encoding (a small cousin of hashids).

A test package of gymsmith's own: none of its tests pins a value the agent could not read (each code a test
expects is decoded by another test, each scrambled number unscrambled), so its tasks keep only variant hidden tests
(docs/repos.md).
"""

ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"
MODULUS = 2147483647  # a prime: scrambling is a bijection on 0..MODULUS-1
FACTOR = 1103515245
WIDTH = 7


def scramble(n: int, salt: int = 7) -> int:
    """`n` mixed with `salt`: an affine map modulo a prime, so `unscramble` undoes it."""
    return (n * FACTOR + salt * 104729) % MODULUS


def unscramble(m: int, salt: int = 7) -> int:
    """The number `scramble` turned into `m` with `salt`."""
    return ((m - salt * 104729) * pow(FACTOR, -1, MODULUS)) % MODULUS


def to_code(m: int) -> str:
    """`m` in the alphabet's base, least significant digit first, padded to WIDTH letters."""
    base = len(ALPHABET)
    out = []
    while m or len(out) < WIDTH:
        m, r = divmod(m, base)
        out.append(ALPHABET[r])
    return "".join(out)


def from_code(code: str) -> int:
    """The number `to_code` wrote as `code`."""
    base = len(ALPHABET)
    m = 0
    for ch in reversed(code):
        m = m * base + ALPHABET.index(ch)
    return m


def check_letter(code: str) -> str:
    """A letter that changes when any letter of `code` does: the position-weighted sum of its digits."""
    total = sum((i + 1) * ALPHABET.index(ch) for i, ch in enumerate(code))
    return ALPHABET[total % len(ALPHABET)]


def encode(n: int, salt: int = 7) -> str:
    """The code of `n` under `salt`: its scrambled value in letters and a check letter."""
    body = to_code(scramble(n, salt))
    return body + check_letter(body)


def decode(code: str, salt: int = 7) -> int:
    """The number `encode` gave `code`; ValueError if its check letter does not match."""
    body, check = code[:-1], code[-1:]
    if check_letter(body) != check:
        raise ValueError(f"bad check letter in {code!r}")
    return unscramble(from_code(body), salt)
