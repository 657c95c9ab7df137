"""`core.splice`: a model agent's request told as what it shares with the previous one (its prefix and, past the
context limit, the run of the previous request it repeats after the truncation note), rebuilt exactly."""

from __future__ import annotations

import random

from gymsmith.core.splice import WORK, splice, unsplice


def test_every_sequence_is_rebuilt_exactly_from_its_splice():
    rng = random.Random(7)
    for _ in range(5000):
        context = [rng.randrange(3) for _ in range(rng.randrange(30))]
        new = [rng.randrange(3) for _ in range(rng.randrange(30))]
        if context and rng.random() < 0.5:  # a truncated request: the head, a note, a run of the context, more
            a, b = rng.randrange(len(context) + 1), rng.randrange(len(context) + 1)
            new = context[:a] + [9] * rng.randrange(3) + context[b:rng.randrange(b, len(context) + 1)] + new[:4]
        ends = rng.choice([None, [len(context)], [rng.randrange(len(context) + 2), len(context)], [0, 99]])
        cut = splice(context, new, ends=ends, min_run=rng.choice([1, 2, 5]))
        assert unsplice(context, *cut) == new
        assert cut.kept + cut.copied + len(cut.tail) == len(new)


def test_a_truncated_request_keeps_only_the_note_and_what_is_new():
    head, kept_turns, reply, new = list(range(100)), list(range(1000, 31000)), list(range(40000, 40200)), [5] * 2000
    context = head + list(range(500, 1000)) + kept_turns + reply  # the last prompt (its oldest turn too) and reply
    request = head + [7, 7, 7] + kept_turns[10_000:] + reply + new
    cut = splice(context, request, ends=[len(context) - len(reply), len(context)], min_run=16)
    assert (cut.kept, cut.copied, len(cut.tail)) == (100, 20_000 + 200, 3 + 2000)
    assert unsplice(context, *cut) == request


class Counted(list):
    """A list that counts the items read from it one at a time."""

    reads = 0

    def __getitem__(self, index):
        if isinstance(index, int):
            Counted.reads += 1
        return super().__getitem__(index)


def test_what_a_policy_writes_cannot_make_it_cost_the_square_of_its_length():
    """A conversation of one repeated token (what a policy's replies can be) made every position a candidate end whose
    run was compared item by item: 30,000 tokens cost 2.25e8 comparisons, seconds of the engine's loop per turn. The
    comparisons are bounded in all (WORK per item); the splice found is still exact."""
    n = 30_000
    context, request = Counted([7] + [1] * (n // 2)), Counted([1] * n)
    Counted.reads = 0
    cut = splice(context, request)
    assert Counted.reads <= (2 * WORK + 4) * (len(context) + len(request))
    assert unsplice(list(context), *cut) == request and cut.copied >= n // 2
