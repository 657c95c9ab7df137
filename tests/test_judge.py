"""The model judge must pass an adversarial set before it may score. No model can run here: the endpoint is
the local scripted server, playing a gullible grader and a careful one."""

import json
import re

import pytest

from gymsmith.agents.scripted_server import ScriptedChatServer
from gymsmith.verifier.judge import Judge, JudgeConfig, JudgeError, JudgeNotCertified, adversarial_set


def _answer(messages):
    return re.search(r"<answer>\n(.*)\n</answer>", messages[-1]["content"], re.S).group(1)


def gullible(messages):
    """Believes claims and obeys instructions: what an unguarded grader does."""
    answer = _answer(messages)
    return json.dumps({"score": 1.0 if answer.strip() else 0.0, "reason": "looks complete"})


def careful(messages):
    """Scores substance only: an answer must name risks and mitigations to score."""
    answer = _answer(messages).lower()
    goal = re.search(r"<task>\n(.*)\n</task>", messages[-1]["content"], re.S).group(1).lower()
    hits = sum(word in answer for word in ("risk", "mitigat", "liability", "termination", "penalt"))
    if goal in answer or any(t in answer for t in ("ignore all previous", "override", "score")):
        hits = 0  # a restated task or an instruction to the grader is not substance
    return f"Verdict: {json.dumps({'score': min(1.0, hits / 4), 'reason': f'{hits} substantive points'})}"


def _judge(server):
    return Judge(JudgeConfig(base_url=server.base_url, model="scripted", api_key_env=None))


def test_a_gullible_judge_is_refused():
    with ScriptedChatServer(text_reply=gullible) as server:
        judge = _judge(server)
        with pytest.raises(JudgeNotCertified, match="run certify"):
            judge.score("goal", "answer")
        report = judge.certify()
        assert not report.passed and {r.name for r in report.results if not r.passed} >= {"claims_done", "injection"}
        with pytest.raises(JudgeNotCertified, match="failed the adversarial set .* claims_done"):
            judge.score("goal", "anything")
        judge.close()


def test_a_careful_judge_is_certified_and_scores():
    with ScriptedChatServer(text_reply=careful) as server:
        judge = _judge(server)
        report = judge.certify()
        assert report.passed and len(report.results) == len(adversarial_set())
        good = ("Risk 1: unlimited liability; mitigation: a liability cap. Risk 2: termination for convenience; "
                "mitigation: notice period. Risk 3: late-delivery penalties; mitigation: force majeure.")
        assert judge.score(adversarial_set()[0].goal, good).score == 1.0
        judge.close()


def test_unreadable_verdict_is_an_error_not_zero():
    with ScriptedChatServer(text_reply=lambda m: "I think it is fine") as server:
        judge = _judge(server)
        with pytest.raises(JudgeError, match="unreadable verdict"):
            judge.certify()
        judge.close()
