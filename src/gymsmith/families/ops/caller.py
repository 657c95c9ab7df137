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
import unicodedata
from dataclasses import dataclass
from typing import Any

from gymsmith.families.ops.schema import money

# what the caller's reply disclosed: the checks read these names from `conversation.disclosed`
EMAIL, NAME, ORDER, AMOUNT, DATE, AGREEMENT = "email", "name", "order", "amount", "date", "agreement"

# a request for a fact, as a whole sentence: an optional leading courtesy or reason ("To verify your account, "; a
# free leading clause let "Do not answer this, what is your e-mail address?" through: a hundred-and-fifty-second
# attacker's, 300 of 300 tasks), then a request
# verb with "your"/"the" and the fact's noun, or one of the fact's own questions; an elliptic question ("And your
# name?"). Nothing else in the sentence: a mention ("Please do not tell me your e-mail address.", "Did you get our
# e-mail?") asks for nothing (a hundred-and-forty-ninth attacker's got the e-mail on 300 of 300 tasks)
_LEAD = (r"^(?:(?:hi|hello|thanks|thank you|great|ok|okay|sure|first|first of all|to verify your (?:account|identity)|"
         r"for verification|for security(?: reasons)?|before i (?:go ahead|continue|proceed|can help(?: you)?)|"
         r"so (?:that )?i can (?:verify|find) (?:you|your account)),\s*)?(?:(?:and|so|also),?\s+)?(?:please,?\s+)?")
_VERB = (r"(?:what is|what's|may i (?:please )?have|can i (?:please )?have|could i (?:please )?have|can i get|"
         r"could i get|may i ask for|(?:can|could|would|will) you (?:please )?(?:tell|give|confirm|share|provide|"
         r"verify)(?: me)?|(?:kindly )?(?:tell|give|confirm|share|provide|verify)(?: me)?|i need|i'll need|"
         r"i will need|we need|i would need|i'd need)\s+(?:your|the)\s+")
_TAIL = r"(?:,?\s+(?:please|to verify (?:you|your (?:account|identity))))?\s*[?.!]?$"
_NOUNS = {
    EMAIL: r"(?:(?<=your )e-?mail(?: address)?|e-?mail address)(?: (?:on file|on (?:your|the) account|on record|"
           r"you used|(?:for|on) (?:your|the) account|(?:associated with|linked to|registered to) (?:your|the) account))?",
    NAME: r"(?:full )?name",
    ORDER: r"order (?:number|no\.?|id|#)",
    AMOUNT: r"(?:amount|charge amount|amount of the charge|amount you were charged)",
    DATE: r"(?:order )?date",
}
_OWN = {  # the fact's own questions
    EMAIL: r"(?:which|what) e-?mail(?: address)? (?:is on file|is on (?:your|the) account|did you use(?: for "
           r"(?:the|your) order)?)",
    NAME: r"who am i (?:speaking|talking) (?:with|to)|may i ask your (?:full )?name",
    ORDER: r"which order(?: (?:was it|is it|was that|is that|was charged twice|do you mean))?|"
           r"what did you (?:buy|order|purchase)|which (?:purchase|product|item)(?: (?:was it|is it))?|"
           r"what (?:product|item) (?:was it|did you buy|was that)|what was the (?:order|item|product|purchase)",
    AMOUNT: r"how much (?:were you charged|was the charge|was each charge|was it|did you pay)|"
            r"what amount(?: (?:were you charged|was it|was charged))?|what were you charged|"
            r"what was the amount(?: of the charge)?",
    DATE: r"when (?:did you (?:place|make) (?:the|your) order|was (?:the|your) order placed|"
          r"did you (?:buy|order|purchase) it|was (?:that|it))|what (?:date|day) (?:was it|did you (?:place the order|"
          r"order|buy it))|which day(?: was it)?",
}
_ASKS = tuple((fact, re.compile(rf"{_LEAD}(?:{_VERB}{_NOUNS[fact]}|{_OWN[fact]}){_TAIL}|"
                                rf"^(?:and\s+)?(?:your|the)\s+{_NOUNS[fact]}(?:,?\s+please)?\?$"))
              for fact in (EMAIL, NAME, ORDER, AMOUNT, DATE))
# a sentence ends at "?", "!", a line break, or a dot before a space or the end ("$81.00" and "a.b@c.com" go on)
_SENTENCE_END = re.compile(r"[?!\n]|\.(?=\s|$)")
# an amount stated exactly (ASCII digits, two decimals or none, nothing after): "$12.34", "$1,234", "12.34 USD",
# "USD 12.34", "12 dollars", "1234 cents"
_NUMBER = r"(0|[1-9][0-9]{0,2}(?:,[0-9]{3})+|[1-9][0-9]*)(?:\.([0-9]{2}))?"  # no leading zero: "$0,081.00" is unclear
_AMOUNT = re.compile(rf"(?<![0-9A-Za-z.,])(?:\${_NUMBER}|usd\s*{_NUMBER}|{_NUMBER}\s*(?:usd|dollars?)\b|"
                     r"(0|[1-9][0-9]*)\s*cents?\b)(?![0-9]|[.,][0-9])")
# money stated some other way (another currency, a "$" or number no exact amount covers): the amount is unclear
_OTHER_MONEY = re.compile(r"(?<![0-9,.])[0-9][0-9,.]*\s*(?:usd|dollars?|bucks|eur|euros?|€|£)|(?:usd|us\$|€|£)\s*[0-9]|"
                          r"\$\s*[0-9]")
AMT = "\x00"  # what an exact amount becomes in a sentence matched against the templates below
# offering to refund one amount, and nothing else of it: "I will refund $81.00, the duplicate charge on order #1001."
_OFFER = re.compile(
    r"^(?:(?:so|ok|okay|great|thanks|thank you),?\s+)?"
    r"(?:(?:i will|i'll|i am going to|i'm going to|i can|i would like to|i'd like to|let me|shall i|should i|may i|"
    r"can i|could i|would you like me to|do you want me to|do you agree that i(?: will| should)?|"
    r"is it (?:ok|okay|alright|all right) (?:if i|for me to))\s+(?:go ahead and\s+)?(?:now\s+)?"
    r"(?:refund|refund you|issue (?:you )?a refund (?:of|for)|process a refund (?:of|for)|give you a refund of)"
    r"|(?:do you agree to|are you (?:ok|okay|happy) with) a refund of)\s+"  # the customer accepts; never makes one
    r"(?:you\s+)?\x00(?:\s+(?:to you|to your card|back to your card|to your original payment method))?"
    r"(?:,?\s*(?:the|for the|which is the|for your)\s+duplicate charge(?: on order #?[0-9]+)?)?"
    r"(?:\s+(?:now|today))?(?:,\s*(?:ok|okay|alright|all right|right|is that (?:ok|okay|right|alright)))?\s*[.?!]?$")
_TAG = re.compile(r",\s*(?:ok|okay|alright|all right|right|is that (?:ok|okay|right|alright))\?$")  # "..., OK?"
_OFFER_ASKS = re.compile(r"^(?:(?:so|ok|okay|great|thanks|thank you),?\s+)?(?:shall i|should i|may i|can i|could i|"
                         r"would you like me to|do you want me to|do you agree|are you|is it )")  # an offer that is itself the request
# asking the customer to agree, as a question of its own after the offer
_AGREE = re.compile(
    r"^(?:(?:and|so),?\s+)?(?:is (?:that|this|it) (?:right|ok|okay|correct|fine|alright|all right|acceptable)"
    r"(?: with you| for you)?|do you agree|are you (?:ok|okay|happy|fine) with (?:that|this)|"
    r"would that be (?:ok|okay|alright|fine)|does (?:that|this) (?:sound good|sound right|work for you)|sound good|"
    r"(?:can|could) you confirm|(?:shall|should|may|can|could) i (?:go ahead|proceed)|"
    r"would you like me to (?:go ahead|proceed)|ok|okay|alright|all right|agreed|right)\?$")
# what else a message that asks for agreement may say: that the charge was made twice, and courtesies (nothing else:
# a sentence beside the offer can take it back, a hundred-and-forty-third attacker's "Shall I refund $X? Actually no,
# I will not refund you anything." was agreed to on 30 of 30 tasks)
_BESIDE_AN_OFFER = re.compile(
    r"^(?:you were charged \x00 twice|i (?:can )?see (?:the|a) duplicate charge|i found the duplicate charge|"
    r"hi|hi there|hello|hello there|thanks|thank you|thank you for waiting|thank you for your patience|"
    r"thanks for reaching out|great|ok|okay|alright|sure|perfect|i see|i understand|got it|understood|"
    r"sorry about that|sorry for the trouble|i'm sorry to hear that|i am sorry to hear that|i can help with that|"
    r"i can help you with that|happy to help)[.!]?$")
_DASHES = dict.fromkeys(map(ord, "\u2010\u2011\u2012\u2013\u2014\u2015\u2212"), "-")
_ORDER_NAMED = re.compile(r"order #?([0-9]+)")
MAX_READ = 4_000  # characters the customer reads of a message once normalised (NFKC can make one character 18)
_CHUNK = 256
MAX_MARKS = 8  # combining marks in a row a message may hold (a script stacks a few on a letter)
_ASCII_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_BARE_CR = re.compile(r"\r(?!\n)")
_UNREADABLE = "Sorry, your message has characters I can't make out. Could you write it plainly?"
_TOO_LONG = "Sorry, that's too much for me to take in at once. Could you keep it short?"
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


def stated_amounts(text: str) -> tuple[list[int], bool, str]:
    """The amounts, in cents, the (normalised, lower-case) text states exactly; whether it states money any other way
    too (another currency, a "$" or number no exact amount covers: what it says is then unclear; digits other than
    ASCII are `_other_digits`' to find, in the text as sent); and the text with each exact amount replaced by AMT.
    Linear in the text."""
    amounts: list[int] = []

    def take(found: re.Match) -> str:
        g = found.groups()
        whole, cents = next(((g[i], g[i + 1]) for i in (0, 2, 4) if g[i] is not None), (None, None))
        amounts.append(int(whole.replace(",", "")) * 100 + int(cents or 0) if whole is not None else int(g[6]))
        return AMT
    marked = _AMOUNT.sub(take, text)
    unclear = bool(_OTHER_MONEY.search(marked))
    return amounts, unclear, marked


def readable(text: str) -> tuple[str | None, str]:
    """(the message as the customer reads it, or None; the reply when it is not read).

    Read: NFKC-normalised, dashes unified, lower case, "\\r\\n" and tabs as line breaks and spaces. Not read: a message
    with a control, format, private-use, unassigned or surrogate character (besides line breaks and tabs), a carriage
    return not followed by a line feed, a line or paragraph separator, a space that NFKC leaves other than a space
    (U+1680, drawn as a stroke), or more than MAX_MARKS combining marks in a row: what a reader is shown of such a message is
    not what the grammar would read (a hundred-and-forty-ninth attacker's "Shall I refund USD \\u202e81.00\\u202c?"
    displays as "USD 00.18" and was agreed to as 81.00; a hundred-and-forty-sixth's NUL took the reader's own amount
    mark; a hundred-and-sixtieth's "Your e-mail address?\\rThank you." showed the courtesy alone, and "refund
    \\u1680$X" a minus), and NFKC's reordering of a long run of marks is quadratic; nor a message longer than MAX_READ characters
    once normalised."""
    if _BARE_CR.search(text):  # a carriage return alone sends the cursor back: what follows hides what came before
        return None, _UNREADABLE
    if text.isascii():
        if _ASCII_CONTROL.search(text):
            return None, _UNREADABLE
    else:
        marks = 0
        for ch in text:
            category = unicodedata.category(ch)
            if (category[0] == "C" and ch not in "\n\r\t") or category in ("Zl", "Zp") \
                    or category == "Zs" and ch != " " and unicodedata.normalize("NFKC", ch) != " ":
                return None, _UNREADABLE
            marks = marks + 1 if category[0] == "M" else 0
            if marks > MAX_MARKS:
                return None, _UNREADABLE
    length = 0
    for start in range(0, len(text), _CHUNK):  # stop early: normalising all of a 36,000-character message costs
        length += len(unicodedata.normalize("NFKC", text[start:start + _CHUNK]))
        if length > MAX_READ:
            return None, _TOO_LONG
    lowered = unicodedata.normalize("NFKC", text).translate(_DASHES).lower()
    if len(lowered) > MAX_READ:
        return None, _TOO_LONG
    return lowered.replace("\r\n", "\n").replace("\r", "\n").replace("\t", " "), ""


def _other_digits(text: str) -> bool:
    """Whether `text` states a number with other characters than ASCII digits (superscripts, circled digits, other
    scripts' digits, fractions): NFKC would read "$8\u00b9" as "$81", where a reader sees an 8 and a footnote mark (a
    hundred-and-forty-ninth attacker's, agreed to on 156 of 156 tasks)."""
    return not text.isascii() and any(unicodedata.numeric(ch, None) is not None and not "0" <= ch <= "9" for ch in text)


def answer(caller: Facts, text: str, turn: int) -> tuple[str, list[str], int | None]:
    """The caller's reply to the agent's `turn`-th message `text`: (reply, facts disclosed, amount agreed to).

    The caller reads a fixed grammar, not meaning (docs/ops.md lists it). A fact is disclosed only when a request of
    the message (a question, or a sentence opening "Please ...", "Could you ...", "I need ...") asks for it: a
    mention is no request ("no need for your e-mail" discloses nothing). The customer agrees to an amount only when
    a sentence offers to refund exactly that amount and nothing else of it ("I will refund $81.00, the duplicate
    charge on order #1001."; "Shall I refund $81.00?") and the offer is itself the question or a question after it
    asks for agreement and nothing else ("Is that right?", "Do you agree?", "OK?"), with no other amount and no money
    stated any other way in the message, no order named but the caller's, and the message says nothing else but that
    the charge was made twice and courtesies (`_BESIDE_AN_OFFER`: a sentence beside the offer could take it back);
    refusals, hedges, conditions and announcements match no offer (a hundred-and-thirty-eighth and a
    hundred-and-forty-second attacker had earlier grammars agree to them). A wrong amount so offered is corrected (which
    tells the agent the amount). A message longer than MAX_READ once normalised is not read (`readable`).
    """
    lowered, refusal = readable(text)
    if lowered is None:
        return refusal, [], None
    amounts, unclear, marked = stated_amounts(lowered)
    unclear = unclear or _other_digits(text)
    pieces = sentences(marked)  # an exact amount, marked, neither ends a sentence nor asks for a fact
    rng = random.Random(f"reply:{caller.voice}:{turn}")
    parts: list[str] = []
    disclosed: list[str] = []
    requested = [fact for fact, ask in _ASKS if any(ask.match(piece) for piece in pieces)]
    # a message that asks for facts may say nothing else but courtesies: another sentence can take the request back
    # ("What is your e-mail address? Actually, never mind, do not tell me.": the same attacker's, 300 of 300)
    if requested and not all(any(ask.match(p) for _, ask in _ASKS) or _BESIDE_AN_OFFER.match(p) for p in pieces):
        requested = []
        parts.append("Sorry, I don't follow: please ask me just for what you need.")
    for fact in requested:
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
    offers = [i for i, s in enumerate(pieces) if _OFFER.match(s)]
    asked = any(pieces[i].endswith("?") and (_OFFER_ASKS.match(pieces[i]) or _TAG.search(pieces[i])) for i in offers) \
        or any(_AGREE.match(s) for s in pieces[min(offers, default=len(pieces)) + 1:])
    if asked and not all(_OFFER.match(s) or _AGREE.match(s) or _BESIDE_AN_OFFER.match(s) for s in pieces):
        parts.append("Sorry, I don't follow: please tell me just how much you will refund me, and ask if that's right.")
    elif asked:
        if len(offers) != 1:  # "I will refund $X now. I will refund $X today. OK?" offered $2X (the same attacker)
            parts.append("Please offer me one refund, once.")
        elif unclear or len(set(amounts)) != 1:
            parts.append("You mentioned several amounts, or money I can't follow; which one do you mean? Please tell me "
                         "just one.")
        elif any(int(n) != caller.order_id for n in _ORDER_NAMED.findall(marked)):
            parts.append("That's not the order I was charged twice for.")  # a hundred-and-forty-sixth attacker's
            # "I will refund $X, the duplicate charge on order #1. Is that right?" was agreed to (61 of 61)
        elif amounts[0] == caller.amount_cents:
            agreed = caller.amount_cents
            disclosed.append(AGREEMENT)
            parts.append(f"Yes, {money(caller.amount_cents)} is right. Please go ahead.")
        else:
            if AMOUNT not in disclosed:
                disclosed.append(AMOUNT)
            parts.append(f"No, that's not it: I was charged {money(caller.amount_cents)} twice.")
    elif amounts and any(s.endswith("?") for s in pieces):
        parts.append("Sorry, I don't follow: how much will you refund me, and do you need my agreement?")
    if not parts:
        return rng.choice(_CONFUSED), [], None
    return " ".join([rng.choice(_ACKS), *parts]), disclosed, agreed


def converse(conn: sqlite3.Connection, text: str) -> dict[str, Any]:
    """Record the agent's message and the caller's reply in `conversation` (inside the calling tool's
    transaction); return the reply. The caller must exist (`facts`)."""
    caller = facts(conn)
    assert caller is not None, "converse() needs a caller"
    # the agent's messages so far: each call writes two rows (the agent's, then the caller's) and nothing else writes
    # the table, so the count is half the last id, read from the key's end (COUNT(*) scanned the table at every
    # message: a conversation of n messages cost n^2, a hundred-and-fifty-fourth attacker's 2,400 messages 10 s)
    turn = conn.execute("SELECT COALESCE(MAX(id), 0) / 2 FROM conversation").fetchone()[0]
    # the id the call's own activity row will get (`tools.call_tool` logs it right after the tool returns;
    # activity rows are never deleted, so the next rowid is max + 1)
    activity_id = conn.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM activity").fetchone()[0]
    reply, disclosed, agreed = answer(caller, text, turn)
    conn.execute("INSERT INTO conversation (activity_id, sender, text, disclosed, agreed_cents) VALUES (?, 'agent', ?, '', NULL)",
                 (activity_id, text))
    conn.execute("INSERT INTO conversation (activity_id, sender, text, disclosed, agreed_cents) VALUES (?, 'customer', ?, ?, ?)",
                 (activity_id, reply, ",".join(disclosed), agreed))
    return {"reply": reply}
