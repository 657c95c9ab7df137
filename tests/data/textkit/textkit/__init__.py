"""Scores and ciphers of words: a test package of gymsmith's own whose functions take only text.

Its tests give their calls no integer, so a hidden variant of one of them (docs/repos.md) must move a text: a digit
of it changed, or a word of it swapped for another word of the test file.
"""

import unicodedata

LETTERS = "abcdefghijklmnopqrstuvwxyz"


def word_value(word: str) -> int:
    """The sum of the alphabet positions of the letters of `word` (case ignored, other characters skipped)."""
    return sum(LETTERS.index(ch) + 1 for ch in word.lower() if ch in LETTERS)


def text_value(text: str) -> int:
    """The sum of `word_value` over the words of `text`, each weighted by its position (1-based)."""
    return sum(i * word_value(w) for i, w in enumerate(text.split(), start=1))


def vigenere(text: str, key: str) -> str:
    """`text` with each letter shifted by the next letter of `key` (a = 0); other characters kept, case kept."""
    shifts = [LETTERS.index(ch) for ch in key.lower() if ch in LETTERS] or [0]
    out, k = [], 0
    for ch in text:
        low = ch.lower()
        if low in LETTERS:
            moved = LETTERS[(LETTERS.index(low) + shifts[k % len(shifts)]) % 26]
            out.append(moved.upper() if ch.isupper() else moved)
            k += 1
        else:
            out.append(ch)
    return "".join(out)


def digits_check(text: str) -> int:
    """A check number of the digits of `text`: each digit times its position among them (1-based), summed, times 7."""
    digits = [int(ch) for ch in text if ch.isdigit()]
    return 7 * sum(i * d for i, d in enumerate(digits, start=1))


def fold_accents(text: str) -> str:
    """`text` with its accents removed ('café' -> 'cafe'). Its tests hold no accent: handing the text back passes
    them all, which a task's hidden tests must not let pass (gymsmith's `mutate.standins`)."""
    return "".join(ch for ch in unicodedata.normalize("NFKD", text) if not unicodedata.combining(ch))


def folded_value(text: str) -> int:
    """`text_value` of `text` with its accents folded."""
    return text_value(fold_accents(text))
