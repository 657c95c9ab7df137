"""A simulated customer on the line: seeded facts the agent must ask for, and a deterministic reply to each message.

A billing task with `user=customer` withholds who is calling: the goal gives only the customer's opening
words, and several customers have a real duplicate charge. The caller holds the facts (the e-mail address on
file, their name, the order, the amount) and discloses one only when the agent's message asks for it. The
store's policy, stated in the goal, says what the agent must obtain before it acts: the e-mail address on
file (always), and the customer's agreement to the exact amount (on some tasks).

Everything lives in the task's database: the facts in `caller` (no tool reads that table) and the talk in
`conversation`, written by the `message_user` tool inside the call's transaction, with the id of the call's
own `activity` row. A reply depends only on the facts and on how many messages came before it, so the
verifier's replay of the activity log rebuilds the conversation exactly, and the checks can tell, from the
final state alone, which facts the agent held before each of its calls.
"""

from __future__ import annotations

import random
import re
import sqlite3
from dataclasses import dataclass
from typing import Any

from gymsmith.families.ops.schema import money

# what the caller's reply disclosed: the checks read these names from `conversation.disclosed`
EMAIL, NAME, ORDER, AMOUNT, DATE, AGREEMENT = "email", "name", "order", "amount", "date", "agreement"

_ASKS = (  # (fact, what in the agent's message asks for it), on the message in lower case
    (EMAIL, re.compile(r"e-?\s?mail")),
    (NAME, re.compile(r"\bname\b")),
    (ORDER, re.compile(r"which order|order (?:number|no\b|id\b|#)|what did you (?:buy|order|purchase)|"
                       r"which (?:product|item)|what (?:product|item)")),
    (AMOUNT, re.compile(r"how much|what amount|which amount|amount were you|amount was")),
    (DATE, re.compile(r"\bwhen\b|\bdate\b|what day|which day")),
)
# a sentence ends at "?", "!", a line break, or a dot before a space or the end ("$81.00" and "a.b@c.com" go on)
_SENTENCE_END = re.compile(r"[?!\n]|\.(?=\s|$)")
# an amount stated exactly: "$12.34", "$1,234", "1234 cents" (ASCII digits, two decimals or none, nothing after)
_AMOUNT = re.compile(r"(?<![0-9A-Za-z])(?:\$\s*([0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.([0-9]{2}))?|([0-9]+)\s*cents?\b)"
                     r"(?![0-9]|[.,][0-9])")
# money stated some other way (another currency word, "$" a strict amount does not cover): the amount is unclear
_OTHER_MONEY = re.compile(r"[0-9][0-9,.]*\s*(?:usd|dollars?|bucks|eur|euros?|€|£)|(?:usd|us\$|€|£)\s*[0-9]|\$\s*[0-9]")
# asking the customer to agree (in a question): "Is that right?", "Do you agree?", "Shall I ...?", "OK?"
_AGREE = re.compile(r"\b(?:is (?:that|this|it) (?:right|ok|okay|correct|fine|alright|all right)|do you agree|"
                    r"are you (?:ok|okay|happy) with|shall i|should i|may i|can i go ahead|ok|okay|alright)\b")
# what makes a statement of an amount something other than the refund of that amount
_NOT_PLAINLY = re.compile(r"n't\b|\b(?:not|no|never|cannot|either|or|minus|plus|less|fees?|up to|about|around|"
                          r"roughly|approximately|partial|part of|some of|half)\b")
_OPENINGS = ("Hi, I think I was charged twice for one of my orders. Can you sort it out?",
             "Hello. My card shows the same charge two times for one order. Please fix it.",
             "Hi there, I've been billed twice for something I bought. I'd like my money back for the extra charge.")
_ACKS = ("Sure.", "Of course.", "OK.", "Right.")
_CONFUSED = ("Sorry, I'm not sure what you need from me. I can give you my e-mail address or my name, or tell you "
             "about the order.",
             "I don't follow. Do you need my e-mail address, my name, or the order?")


@dataclass(frozen=True)
class Facts:
    """What the caller knows (one `caller` row)."""

    customer_id: int
    email: str
    name: str
    order_id: int
    product: str
    placed_date: str
    amount_cents: int
    knows_order: bool  # whether they have the order number, or only what they bought and when
    confirm: bool  # the store's policy: the customer agrees to the amount before a refund
    voice: str  # seeds the wording

    @property
    def opening(self) -> str:
        return random.Random(f"opening:{self.voice}").choice(_OPENINGS)

    def row(self) -> dict[str, Any]:
        return {"id": 1, "customer_id": self.customer_id, "email": self.email, "name": self.name,
                "order_id": self.order_id, "product": self.product, "placed_date": self.placed_date,
                "amount_cents": self.amount_cents, "knows_order": int(self.knows_order), "confirm": int(self.confirm),
                "voice": self.voice}


def facts(conn: sqlite3.Connection) -> Facts | None:
    """The caller of the task in `conn`, or None when no one is on the line."""
    cur = conn.execute("SELECT * FROM caller")
    row = cur.fetchone()
    if row is None:
        return None
    values = dict(zip([c[0] for c in cur.description], row))
    del values["id"]
    values["knows_order"], values["confirm"] = bool(values["knows_order"]), bool(values["confirm"])
    return Facts(**values)


def sentences(text: str) -> list[str]:
    """The message's sentences (each with its closing mark), in one pass over it."""
    out, start = [], 0
    for end in _SENTENCE_END.finditer(text):
        out.append(text[start:end.end()].strip())
        start = end.end()
    out.append(text[start:].strip())
    return [s for s in out if s]


def stated_amounts(text: str) -> tuple[list[int], bool]:
    """The amounts, in cents, the text states exactly, and whether it states money any other way too (another
    currency word, a "$" no exact amount covers, digits of another script): then what it says is unclear."""
    amounts = [int(whole.replace(",", "")) * 100 + int(cents or 0) if whole else int(plain)
               for whole, cents, plain in _AMOUNT.findall(text)]
    rest = _AMOUNT.sub(" ", text)
    return amounts, bool(_OTHER_MONEY.search(rest)) or any(ch.isdigit() and not ch.isascii() for ch in text)


def answer(caller: Facts, text: str, turn: int) -> tuple[str, list[str], int | None]:
    """The caller's reply to the agent's `turn`-th message `text`: (reply, facts disclosed, amount agreed to).

    A fact is disclosed only when a question of the message (a sentence ending in "?") asks for it: a mention is
    no question ("no need for your e-mail" discloses nothing). The customer agrees to an amount only when asked to
    (a question such as "Is that right?", "Do you agree?", "OK?") about a message stating exactly one amount, in a
    sentence that says it will be refunded and says nothing else of it (no negation, hedge or deduction: "I will not
    refund $X", "either $X or ...", "$X minus a fee" get no agreement), and that amount is the one charged twice; a
    wrong one is corrected (which tells the agent the amount); several amounts, or money stated another way, get a
    question back. This is a fixed grammar, not understanding (docs/ops.md).
    """
    lowered = text.lower()
    parts_of = sentences(lowered)
    questions = " ".join(s for s in parts_of if s.endswith("?"))
    rng = random.Random(f"reply:{caller.voice}:{turn}")
    parts: list[str] = []
    disclosed: list[str] = []
    for fact, ask in _ASKS:
        if not ask.search(questions):
            continue
        disclosed.append(fact)
        if fact == EMAIL:
            parts.append(f"My e-mail address is {caller.email}.")
        elif fact == NAME:
            parts.append(f"My name is {caller.name}.")
        elif fact == ORDER:
            parts.append(f"It was order #{caller.order_id}, the {caller.product}." if caller.knows_order else
                         f"I don't have the order number to hand, sorry. It was the {caller.product} I bought on "
                         f"{caller.placed_date}.")
        elif fact == AMOUNT:
            parts.append(f"Each charge was {money(caller.amount_cents)}.")
        else:
            parts.append(f"I placed the order on {caller.placed_date}.")
    agreed = None
    amounts, unclear = stated_amounts(lowered)
    if _AGREE.search(questions) and (amounts or unclear):
        stating = [s for s in parts_of if stated_amounts(s)[0]]
        if unclear or len(amounts) > 1:
            parts.append("You mentioned several amounts, or money I can't follow; which one do you mean? Please tell me "
                         "just one.")
        elif len(stating) != 1 or "refund" not in stating[0] or _NOT_PLAINLY.search(stating[0]):
            parts.append("Sorry, I don't follow: how much will you refund me?")
        elif amounts[0] == caller.amount_cents:
            agreed = caller.amount_cents
            disclosed.append(AGREEMENT)
            parts.append(f"Yes, {money(caller.amount_cents)} is right. Please go ahead.")
        else:
            if AMOUNT not in disclosed:
                disclosed.append(AMOUNT)
            parts.append(f"No, that's not it: I was charged {money(caller.amount_cents)} twice.")
    if not parts:
        return rng.choice(_CONFUSED), [], None
    return " ".join([rng.choice(_ACKS), *parts]), disclosed, agreed


def converse(conn: sqlite3.Connection, text: str) -> dict[str, Any]:
    """Record the agent's message and the caller's reply in `conversation` (inside the calling tool's
    transaction); return the reply. The caller must exist (`facts`)."""
    caller = facts(conn)
    assert caller is not None, "converse() needs a caller"
    turn = conn.execute("SELECT COUNT(*) FROM conversation WHERE sender = 'agent'").fetchone()[0]
    # the id the call's own activity row will get (`tools.call_tool` logs it right after the tool returns;
    # activity rows are never deleted, so the next rowid is max + 1)
    activity_id = conn.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM activity").fetchone()[0]
    reply, disclosed, agreed = answer(caller, text, turn)
    conn.execute("INSERT INTO conversation (activity_id, sender, text, disclosed, agreed_cents) VALUES (?, 'agent', ?, '', NULL)",
                 (activity_id, text))
    conn.execute("INSERT INTO conversation (activity_id, sender, text, disclosed, agreed_cents) VALUES (?, 'customer', ?, ?, ?)",
                 (activity_id, reply, ",".join(disclosed), agreed))
    return {"reply": reply}
