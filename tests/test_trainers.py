"""Trainer adapters: a Parquet dataset Hugging Face `datasets` loads, a GRPO-style reward function, and the
multi-turn hook with the worked example from docs/trainers.md."""

import json

import datasets
import pytest

from gymsmith.core import SplitPolicyError
from gymsmith.families.ops.generator import generate_world
from gymsmith.registry import TaskSetSpec
from gymsmith.trainers import MultiTurnRollout, export_dataset, grpo_reward


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    path = tmp_path_factory.mktemp("ds") / "train.parquet"
    assert export_dataset(TaskSetSpec(family="ops", count=12, split="train", knobs={"difficulty": [0.0, 0.5], "fidelity": 0.0}), path) == 12
    return datasets.load_dataset("parquet", data_files=str(path), split="train")


def test_datasets_loads_the_export(dataset):
    assert dataset.num_rows == 12 and set(dataset.column_names) == {"prompt", "tools", "task_id", "split", "difficulty", "task"}
    row = dataset[0]
    assert [m["role"] for m in row["prompt"]] == ["system", "user"]
    assert {t["function"]["name"] for t in json.loads(row["tools"])} >= {"submit", "ship_order"}
    assert set(dataset["split"]) == {"train"}


def test_training_datasets_refuse_heldout(tmp_path):
    with pytest.raises(SplitPolicyError, match="training dataset uses split 'train'"):
        export_dataset(TaskSetSpec(family="ops", count=2, split="heldout"), tmp_path / "x.parquet")
    assert export_dataset(TaskSetSpec(family="ops", count=2, split="heldout"), tmp_path / "eval.parquet", allow_heldout=True) == 2


def test_grpo_reward_scores_completions(dataset):
    reward = grpo_reward()
    rows = [dataset[i] for i in range(4)]
    tasks = [json.loads(r["task"]) for r in rows]
    good = ["\n".join(json.dumps(a) for a in generate_world(t["seed"], t["knobs"]).witness) for t in tasks]
    chat = [[{"role": "assistant", "content": None,
              "tool_calls": [{"type": "function", "function": {"name": a["tool"], "arguments": json.dumps(a["arguments"])}}
                             for a in generate_world(t["seed"], t["knobs"]).witness]}] for t in tasks]
    lazy = ["The task is complete."] * 4
    prompts = [r["prompt"] for r in rows]
    task_col = [r["task"] for r in rows]
    assert reward(prompts, good, task=task_col) == [1.0] * 4
    assert reward(prompts, chat, task=task_col) == [1.0] * 4  # chat-format completions with tool_calls
    assert all(score < 0.5 for score in reward(prompts, lazy, task=task_col))
    with pytest.raises(ValueError, match="one entry per sample"):
        reward(prompts, good[:2], task=task_col)
    reward.close()


def test_multi_turn_worked_example(dataset):
    """The worked example of docs/trainers.md, with the oracle standing in for the model's generation."""
    from gymsmith.core import TaskSpec

    task = TaskSpec.model_validate_json(dataset[1]["task"])
    plan = iter(generate_world(task.seed, task.knobs).witness)

    def generate(messages, tools):  # a trainer's model would go here
        nxt = next(plan, {"tool": "submit", "arguments": {}})
        return {"role": "assistant", "content": None,
                "tool_calls": [{"id": "c", "type": "function",
                                "function": {"name": nxt["tool"], "arguments": json.dumps(nxt["arguments"])}}]}

    rollout = MultiTurnRollout(task)
    messages = rollout.messages()
    while not rollout.done and rollout.steps < 100:
        reply = generate(messages, rollout.tools())
        messages += [reply, *rollout.act(reply)]
    reward = rollout.reward()
    assert reward.accepted and reward.value == 1.0
    assert messages[-1]["role"] == "tool"


def test_the_trainer_hooks_take_a_time_limit_as_gymsmith_run_does():
    """A hundred-and-fiftieth attacker's completion slept 4 x 20 s in a code sandbox before the fix: `run_rollout`
    with a 30 s limit paid 0 (`time_limit`), `grpo_reward`, which took no limit, paid 1.0 after 95 s. The hooks now
    take `time_limit_s` (none by default, as `serve`): past it the episode ends at `time_limit` with reward 0."""
    from gymsmith.core.types import EndReason
    from gymsmith.registry import get_family

    task = get_family("code").generate(3, difficulty=0.0)
    rollout = MultiTurnRollout(task, time_limit_s=1.0)
    try:
        rollout.act(json.dumps({"tool": "run_command", "arguments": {"command": "sleep 2"}}))
        rollout.act(json.dumps({"tool": "submit", "arguments": {}}))
        assert rollout.reward().value == 0.0 and rollout.end_reason is EndReason.TIME_LIMIT
    finally:
        rollout.close()
    reward = grpo_reward(time_limit_s=1.0)
    completion = "\n".join(json.dumps({"tool": "run_command", "arguments": {"command": "sleep 2"}}) for _ in range(2))
    assert reward(["p"], [completion], task=[task.model_dump_json()]) == [0.0]
    assert reward.last_details[0]["end_reason"] == "time_limit"
    reward.close()
