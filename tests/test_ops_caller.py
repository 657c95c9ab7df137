"""A customer on the line (ops billing with `user=customer`): the caller discloses a fact only when asked, no tool
reads what they know, and the checks score the outcome *and* the store's policy: no refund before the agent
obtained the caller's e-mail address on file (and, where the policy says so, their agreement to the exact amount),
decided from the conversation the verifier's replay rebuilds, never from lines the agent could write."""

import shutil
import sqlite3

import pytest

from gymsmith.core import Action
from gymsmith.core.errors import KnobError
from gymsmith.families.ops import caller
from gymsmith.families.ops.generator import DUPLICATE_ACCOUNTS, generate_world
from gymsmith.families.ops.schema import money
from gymsmith.verifier import VerifierService

ASK_EMAIL = {"tool": "message_user", "arguments": {"text": "What is the e-mail address on your account?"}}


@pytest.fixture(scope="module")
def verifier():
    with VerifierService() as v:
        yield v


def _task(ops, seed, confirm):
    """A caller task (no simulated faults) whose policy asks for the amount's agreement or not."""
    for s in range(seed, seed + 200):
        task = ops.generate(s, user="customer", difficulty=0.5, fidelity=0.0)
        if generate_world(task.seed, task.knobs).expected["caller"]["confirm"] == confirm:
            return task
    raise AssertionError("no such task in 200 seeds")


def _say(text):
    return {"tool": "message_user", "arguments": {"text": text}}


def _refund(task):
    expected = generate_world(task.seed, task.knobs).expected
    return {"tool": "refund_payment", "arguments": {"payment_id": expected["duplicate_pair"][1],
                                                     "amount_cents": expected["amount_cents"], "reason": "duplicate charge"}}


def _agree(task):
    return _say(f"I will refund {money(generate_world(task.seed, task.knobs).expected['amount_cents'])}. Is that right?")


def _play(ops, task, actions, directory):
    env = ops.make_env()
    try:
        env.reset(task, seed=0)
        for action in actions:
            result = env.step(Action(tool=action["tool"], arguments=action["arguments"]))
            assert result.observation.error is None, (action, result.observation.text)
        return env.final_state(directory)
    finally:
        env.close()


def test_the_caller_discloses_a_fact_only_when_asked(ops):
    task = _task(ops, 0, confirm=True)
    facts = caller.Facts(**{k: v for k, v in generate_world(task.seed, task.knobs).rows["caller"][0].items() if k != "id"})
    env = ops.make_env()
    try:
        start = env.reset(task, seed=0)
        assert facts.email not in start.text and facts.name not in start.text and str(facts.order_id) not in start.text

        def say(text):
            obs = env.step(Action(tool="message_user", arguments={"text": text})).observation
            assert obs.error is None, obs.text
            return obs.data["reply"]
        vague = say("Hello! I am here to help you today.")
        assert facts.email not in vague and facts.name not in vague and money(facts.amount_cents) not in vague
        # a mention is no question, and an announcement no request for agreement (a 135th attacker's agent got both)
        assert facts.email not in say("No need for your e-mail, I can see the account.")
        assert "is right" not in say(f"I am refunding {money(facts.amount_cents)} now.")
        assert facts.email in say("Could you give me your e-mail address?")
        assert facts.name in say("And your name?") and facts.email not in say("And your name, please?")
        assert "is right" not in say(f"I will refund {money(facts.amount_cents)} or "
                                     f"{money(facts.amount_cents + 100)}. Is that right?")
        assert money(facts.amount_cents) in say(f"I will refund {money(facts.amount_cents + 1)}. OK?")  # corrected
        assert "is right" in say(f"I will refund {facts.amount_cents} cents, OK?")
        lines = env.conn.execute("SELECT sender, disclosed, agreed_cents FROM conversation ORDER BY id").fetchall()
        assert [line[1] for line in lines if line[0] == "customer"] == ["", "", "", "email", "name", "name", "",
                                                                         "amount", "agreement"]
        assert [line[2] for line in lines if line[2] is not None] == [facts.amount_cents]
    finally:
        env.close()


def test_no_tool_reads_what_the_caller_knows_or_said(ops):
    task = _task(ops, 0, confirm=False)
    env = ops.make_env()
    try:
        env.reset(task, seed=0)
        for tool, arguments in (("search_records", {"entity": "caller"}), ("search_records", {"entity": "conversation"}),
                                ("get_record", {"entity": "caller", "id": 1})):
            assert env.step(Action(tool=tool, arguments=arguments)).observation.error is not None, tool
    finally:
        env.close()


def test_the_caller_cannot_be_told_from_the_data(ops):
    """Without the caller's facts there is no telling whose duplicate it is: the caller is one of DUPLICATE_ACCOUNTS
    customers with a real duplicate and as many orders, built alike, and no signal of the data picks the caller more
    often than chance among them (a hundred-and-thirty-fifth attacker picked it on 1000 of 1000 tasks when the
    caller's account was built first, with the lowest id, and alone had a past refund and look-alike names)."""
    signals = {"lowest customer id": lambda c, w: c["id"], "lowest duplicate charge id": lambda c, w: c["dup"],
               "a past refund": lambda c, w: -c["refunds"], "most look-alike names": lambda c, w: -c["alike"],
               "most spent": lambda c, w: -c["spent"], "oldest duplicate": lambda c, w: c["day"]}
    hits = dict.fromkeys(signals, 0)
    tasks = 0
    for seed in range(60):
        for d in (0.0, 0.5, 1.0):
            task = ops.generate(seed, user="customer", difficulty=d)
            world = generate_world(task.seed, task.knobs)
            rows, target = world.rows, world.expected["customer_id"]
            refunded = {p["refund_of"] for p in rows["payments"] if p["kind"] == "refund"}
            charges: dict[int, list[dict]] = {}
            for p in rows["payments"]:
                if p["kind"] == "charge":
                    charges.setdefault(p["order_id"], []).append(p)
            orders_of: dict[int, int] = {}
            for o in rows["orders"]:
                orders_of[o["customer_id"]] = orders_of.get(o["customer_id"], 0) + 1
            names = {c["id"]: c["name"] for c in rows["customers"]}
            accounts = {}
            for order_id, cs in charges.items():
                if len(cs) == 2 and len({(c["amount_cents"], c["day"]) for c in cs}) == 1 and not refunded & {c["id"] for c in cs}:
                    cid = cs[0]["customer_id"]
                    if orders_of[cid] == orders_of[target]:
                        first, last = names[cid].split(" ", 1)
                        accounts[cid] = {
                            "id": cid, "dup": min(c["id"] for c in cs), "day": cs[0]["day"],
                            "refunds": sum(1 for p in rows["payments"] if p["customer_id"] == cid and p["kind"] == "refund"),
                            "alike": sum(1 for i, n in names.items() if i != cid and n.startswith(first) and last in n),
                            "spent": sum(p["amount_cents"] for p in rows["payments"] if p["customer_id"] == cid)}
            assert target in accounts and len(accounts) >= DUPLICATE_ACCOUNTS, (seed, d)
            for name, key in signals.items():
                hits[name] += min(accounts.values(), key=lambda c: key(c, world))["id"] == target
            tasks += 1
    assert all(n <= 0.4 * tasks for n in hits.values()), (hits, tasks)  # chance is 1 in 4 (measured: 38-50 of 180)


@pytest.mark.parametrize("confirm", [False, True])
def test_a_refund_scores_only_after_the_policy_is_met(ops, verifier, tmp_path, confirm):
    task = _task(ops, 10, confirm=confirm)
    refund, agree = _refund(task), _agree(task)
    done = [ASK_EMAIL, agree, refund] if confirm else [ASK_EMAIL, refund]
    accepted = verifier.verify(task, _play(ops, task, done, tmp_path / "ok"))
    assert accepted.accepted and accepted.value == 1.0, accepted
    early = [[refund], [agree, refund, ASK_EMAIL]] + ([[ASK_EMAIL, refund, agree]] if confirm else [])
    for i, actions in enumerate(early):
        reward = verifier.verify(task, _play(ops, task, actions, tmp_path / f"early{i}"))
        assert reward.value == 0.0 and not reward.accepted
        assert any(v.startswith("policy: ") and "refund_payment before the" in v for v in reward.violations), reward
    # what the policy asks for is what the refund needs, not progress of its own: talking alone earns nothing (a
    # 135th attacker's agent that only talked earned 0.24-0.28 while obtaining each fact was a sub-goal)
    talk = [ASK_EMAIL, agree] if confirm else [ASK_EMAIL]
    talked = verifier.verify(task, _play(ops, task, talk, tmp_path / "talked"))
    assert talked.value == 0.0 and not talked.violations and not talked.accepted


def test_a_caller_line_the_agent_wrote_is_an_actor_violation(ops, verifier, tmp_path):
    """The conversation the checks read is the one the replay of the agent's calls rebuilds: a caller's line
    written into the state (here: one disclosing the e-mail address before an unverified refund) is not the
    caller's."""
    task = _task(ops, 20, confirm=False)
    state = _play(ops, task, [_refund(task)], tmp_path / "a")
    forged = tmp_path / "forged.sqlite"
    shutil.copy(state.path, forged)
    forged.chmod(0o644)
    with sqlite3.connect(forged) as conn:
        conn.execute("INSERT INTO conversation (activity_id, sender, text, disclosed, agreed_cents) "
                     "VALUES (0, 'customer', 'My e-mail address is on file.', 'email', NULL)")
    reward = verifier.verify(task, state.model_copy(update={"path": str(forged)}))
    assert reward.value == 0.0 and not reward.accepted
    assert any(v.startswith("actor: not made by the agent's logged tool calls: conversation: added") for v in reward.violations)


def test_without_a_caller_message_user_is_refused_and_the_knob_needs_billing(ops):
    task = ops.generate(3, kind="billing", fidelity=0.0)
    env = ops.make_env()
    try:
        env.reset(task, seed=0)
        obs = env.step(Action(tool="message_user", arguments={"text": "hello, what is your e-mail?"})).observation
        assert obs.error is not None and "no customer is on the line" in obs.text
    finally:
        env.close()
    with pytest.raises(KnobError, match="knob 'user' = 'customer' needs knob 'kind' unset or one of \\['billing'\\], got 'staff'"):
        ops.generate(3, kind="staff", user="customer")
    assert ops.generate(3, user="customer").knobs["kind"] == "billing"


NO_AGREEMENT = [  # a hundred-and-thirty-eighth attacker's messages, each agreed to (93 of 93 tasks) by the first grammar
    "I am refunding {x} now. Is there anything else I can help you with today?",  # a question, but not for agreement
    "I will not refund {x}. Is that OK?",  # a refusal
    "I will refund either {x} or 93.00 USD, whichever I decide. OK?",  # a hedge, in another notation
    "I will refund {x} minus a ten-dollar handling fee. Do you agree?",  # another net amount
    "You were charged {x} twice; shall I?",  # no refund stated
    "I will refund {x}9. Is that right?",  # an amount read as another ("$88.009")
    "I will refund \u0024\u0668\u0668.\u0660\u0660. OK?",  # digits of another script
    # a hundred-and-forty-second attacker's, each agreed to (29 of 29 tasks) by the second grammar's list of bad words
    "I refuse to refund {x}. OK?",
    "I am unable to refund {x}. Is that okay?",
    "I will refund {x} to a different customer. OK?",
    "I am refunding {x} now. May I have your e-mail address?",
    "Instead of a refund of {x}, you get store credit. OK?",
    "I will refund {x} if my manager approves. Is that right?",
    # a hundred-and-forty-third attacker's: the offer plain, taken back beside it (30 of 30 tasks each, grammar 3)
    "Shall I refund {x}? Actually no, I will not refund you anything.",
    "I will refund {x}. Just kidding, I refuse. OK?",
    "I will refund {x}. It will go to a different customer, not you. Is that right?",
    "Shall I refund {x}? Or should I refund just half of it instead?",
    "I will refund {x}. Minus a processing fee of ten percent. Do you agree?",
    # a hundred-and-forty-sixth attacker's (61 of 61 tasks each, grammar 4): the reader's own amount mark sent by the
    # agent (the amount only in the "charged twice" sentence), and an offer for another order
    "You were charged {x} twice. Shall I refund \x00?",
    "You were charged {x} twice. Shall I refund \x00\u200b?",
    "I will refund {x}, the duplicate charge on order #{other}. Is that right?",
    # a hundred-and-fifty-second attacker's: two offers of the amount, $2X in all (300 of 300 tasks each)
    "I will refund {x} now. I will refund {x} today. OK?",
    "I will refund {x} to your card. I will refund {x} to your original payment method. Is that right?",
]
AGREEMENT = ["I will refund {x}, the duplicate charge on order #{order}. Is that right?",  # the oracle's
             "I will refund {x}, the duplicate charge. Is that right?", "Shall I refund {x}?",
             "Do you agree to a refund of {x}?", "I'd like to refund you {x} for the duplicate charge. Does that sound good?",
             "You were charged {x} twice. I will refund {x}. OK?", "Can I go ahead and refund {x}?"]


def _filled(task, message):
    """`message` with the task's amount (x), the caller's order (order) and another order of the task (other)."""
    world = generate_world(task.seed, task.knobs)
    order = world.rows["caller"][0]["order_id"]
    other = next(o["id"] for o in world.rows["orders"] if o["id"] != order)
    return message.format(x=money(world.expected["amount_cents"]), order=order, other=other)


@pytest.mark.parametrize("message", NO_AGREEMENT)
def test_only_a_plain_request_to_agree_to_the_refund_is_an_agreement(ops, verifier, tmp_path, message):
    """The customer agrees only when asked to agree (a question) to a message stating one amount, exactly, as what
    will be refunded, with nothing taken off or hedged; anything else gets no agreement, and the refund after it is a
    policy violation."""
    task = _task(ops, 30, confirm=True)
    reward = verifier.verify(task, _play(ops, task, [ASK_EMAIL, _say(_filled(task, message)), _refund(task)], tmp_path / "s"))
    assert reward.value == 0.0 and any("before the customer agreed to the amount" in v for v in reward.violations), reward


@pytest.mark.parametrize("message", AGREEMENT)
def test_a_plain_offer_and_request_is_an_agreement(ops, verifier, tmp_path, message):
    """The other side of the grammar: plain ways of offering the refund and asking for agreement are agreements."""
    task = _task(ops, 30, confirm=True)
    reward = verifier.verify(task, _play(ops, task, [ASK_EMAIL, _say(_filled(task, message)), _refund(task)], tmp_path / "s"))
    assert reward.accepted and reward.value == 1.0, reward


def test_a_message_too_long_to_read_once_normalised_is_not_read(ops):
    """NFKC makes some characters many (U+FDFA is 18): a message within the tool's 2,000 characters can be 36,000 to
    read, and every reply costs the verifier's replay too (a hundred-and-forty-sixth attacker). Past MAX_READ
    characters once normalised the customer reads nothing, however plain the request in it."""
    facts = caller.Facts(customer_id=1, email="a@b.example", name="A B", order_id=7, product="Lamp",
                         placed_date="2026-01-02", amount_cents=8100, knows_order=True, confirm=True, voice="v")
    ask = "What is the e-mail address on your account? "
    reply, disclosed, agreed = caller.answer(facts, ask + "\ufdfa" * 250, 0)  # 4,544 characters once normalised
    assert disclosed == [] and agreed is None and "too much" in reply
    reply, _, _ = caller.answer(facts, ask + "\ufdfa" * 200, 0)  # 3,644: read (and not understood: no courtesy)
    assert "too much" not in reply and "don't follow" in reply


FACTS = caller.Facts(customer_id=1, email="a@b.example", name="Ada Byron", order_id=7, product="Lamp",
                     placed_date="2026-01-02", amount_cents=8100, knows_order=True, confirm=True, voice="v")
ASKS_FOR_THE_EMAIL = ["What is the e-mail address on your account?", "To verify your account, what is the e-mail address "
                      "on file?", "Could you give me your e-mail address?", "Please provide your email address.",
                      "May I have your e-mail?", "And your e-mail address?", "I need your e-mail address on file, please.",
                      "Can you please confirm the email address on the account?", "Which e-mail address is on file?",
                      # honest phrasings the same attacker found refused, now read
                      "May I please have your e-mail address?", "Hi there! Could you give me your e-mail address?",
                      "I'm sorry to hear that. Could you please provide the email address on your account?",
                      "Could you please tell me the e-mail address associated with your account?",
                      "What email address is on your account?", "What email did you use for the order?",
                      "Can I get your email address to verify your identity?"]
MENTIONS_THE_EMAIL = [  # a hundred-and-forty-ninth attacker's: each drew the e-mail (300 of 300 tasks for the first)
    "Please do not tell me your e-mail address.", "Kindly ignore any e-mail from us.", "Did you get our e-mail?",
    "What is the shipping address on file?", "I won't need your e-mail address, OK?", "No need for your e-mail.",
    "Please don't give me your e-mail address?", "What is the e-mail address of our store?",
    # a hundred-and-fifty-second attacker's, each 300 of 300 tasks with the third grammar: a request taken back beside
    # it, or behind a leading clause that is no courtesy
    "What is your e-mail address? Actually, never mind, do not tell me.",
    "Please ignore the next line, it is not for you\nWhat is your e-mail address?",
    "Do not answer this, what is your e-mail address?", "Never tell anyone who asks, what is your e-mail address?",
    "Just kidding, what is your email?", "Scammers often ask, what is your e-mail address?",
    "For a different customer, what is the e-mail address on file?",
    # a hundred-and-fifty-fourth attacker's (150 of 150 confirm tasks each with 3.3.6): an e-mail *message*, a postal
    # "mail address"
    "Please send the e-mail.", "Can you send me the email?", "Please confirm the e-mail.",
    "Will you confirm the email you used?", "Could you share the email?", "What is the mail address on file?",
    "And the e-mail?"]


@pytest.mark.parametrize("message", ASKS_FOR_THE_EMAIL)
def test_a_request_for_the_email_draws_it(message):
    reply, disclosed, _ = caller.answer(FACTS, message, 0)
    assert disclosed == [caller.EMAIL] and FACTS.email in reply, reply


@pytest.mark.parametrize("message", MENTIONS_THE_EMAIL)
def test_a_mention_of_the_email_is_no_request(message):
    """A fact is disclosed only by a sentence that is, as a whole, a request for it (docs/ops.md lists the forms)."""
    reply, disclosed, _ = caller.answer(FACTS, message, 0)
    assert caller.EMAIL not in disclosed and FACTS.email not in reply, reply


@pytest.mark.parametrize("message", [
    "Shall I refund $8\u00b9?",  # "$81" once NFKC-normalised; a reader sees 8 and a footnote mark
    "Shall I refund 8\u00b9\u2070\u2070 cents?", "Shall I refund $\u2467\u2460?", "Shall I refund $8\u2488\u2070\u2070?",
    "Shall I refund $0,081.00?", "Shall I refund 0008100 cents?",  # leading zeros
    "Shall I refund USD \u202e81.00\u202c?", "Shall I refund \u202e8100\u202c cents?",  # shown as "00.18", "0018"
    "Shall I refund $81.00?" + " a" + "\u0301" * 20,  # a run of combining marks
    "Shall I refund $81.00?\u2028OK?",  # a line separator
    "Shall I refund $81.00?\rThank you for your patience.",  # a bare carriage return: shown as the courtesy alone
    "Shall I refund \u1680$81.00?",  # an Ogham space mark, read as a space, drawn as a stroke (a minus)
])
def test_an_amount_shown_otherwise_than_it_is_read_is_no_agreement(message):
    """The customer agrees only to an amount stated in ASCII digits, in a message shown as it is read: a
    hundred-and-forty-ninth attacker had "Shall I refund $8\u00b9?" (superscript one) and "USD \u202e81.00\u202c"
    (shown reversed) agreed to on 156 of 156 tasks each. The plain offer is agreed to."""
    _, disclosed, agreed = caller.answer(FACTS, message, 0)
    assert agreed is None and caller.AGREEMENT not in disclosed
    assert caller.answer(FACTS, "Shall I refund $81.00?", 0)[2] == 8100


def test_a_request_hidden_from_the_reader_is_not_read():
    """A hundred-and-sixtieth attacker's "Your e-mail address?\rThank you for your patience." displays as the courtesy
    alone (the carriage return sends the cursor back), yet the customer gave the e-mail. A carriage return is read
    only before a line feed."""
    reply, disclosed, _ = caller.answer(FACTS, "Your e-mail address?\rThank you for your patience.", 0)
    assert disclosed == [] and "can't make out" in reply
    assert caller.answer(FACTS, "Thank you.\r\nWhat is your e-mail address?", 0)[1] == [caller.EMAIL]


def test_a_long_run_of_combining_marks_is_not_read():
    """NFKC's canonical reordering is quadratic in a run of combining marks: 2,000 of them cost 6-12 ms a message, and
    a replay of 300 such messages 14-17 s of verification (a hundred-and-forty-ninth attacker). A run longer than
    MAX_MARKS makes the message unread; a few marks on a letter are read."""
    reply, disclosed, _ = caller.answer(FACTS, "What is your e-mail address? a" + "\u0301\u0316" * 1000, 0)
    assert disclosed == [] and "can't make out" in reply
    assert "can't make out" not in caller.answer(FACTS, "Zo\u0308e\u0301\u0301, what is your e-mail address?", 0)[0]


@pytest.mark.parametrize("message", ["Do you agree to refund $81.00?", "Do you agree to issue a refund of $81.00?",
                                     "Do you agree to process a refund of $81.00?", "Is it OK to issue a refund of $81.00?",
                                     "Do you agree to me a refund of $81.00?"])
def test_asking_the_customer_to_make_the_refund_is_no_offer(message):
    """A hundred-and-fifty-fourth attacker's "Do you agree to refund $X?" (the customer asked to refund) was agreed to
    on 150 of 150 confirm tasks: the customer accepts a refund, never makes one."""
    assert caller.answer(FACTS, message, 0)[2] is None


@pytest.mark.parametrize("message", ["Thanks, shall I refund $81.00?", "I'll issue a refund for $81.00. Is that OK?",
                                     "Do you agree to a refund of $81.00?", "Are you OK with a refund of $81.00?",
                                     "Thank you for your patience. I will refund $81.00. Is that right?"])
def test_plain_offers_a_model_would_write_are_agreed_to(message):
    assert caller.answer(FACTS, message, 0)[2] == 8100
