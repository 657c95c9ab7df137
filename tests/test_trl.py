"""The TRL worked example of docs/trainers.md, run as written but for its settings line (model, task count, trainer
settings): GRPOTrainer for two steps on CPU, with a tiny randomly initialised Qwen2 model and a BPE tokenizer trained
here (nothing is downloaded: both are saved to a local directory that the example loads by name), scoring completions
with gymsmith's verifier. It checks that the prompt TRL renders and tokenizes lists every tool of the task, by name and
JSON spec. The tokenizer's apply_chat_template is wrapped to record what it returns; it still does the rendering."""

import json
import re
from pathlib import Path

import pytest

from gymsmith.registry import TaskSetSpec
from gymsmith.trainers import export_dataset, tool_calls_of, tools_section

DOC = Path(__file__).resolve().parents[1] / "docs" / "trainers.md"
SETTINGS_LINE = ('model_name, tasks, settings = "Qwen/Qwen2.5-0.5B-Instruct", 5000, '
                 'dict(max_steps=500, num_generations=8, max_completion_length=1024)')
# ChatML, as Qwen's templates render messages (without their tool rendering: the tools are in the system message).
CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def trl_example() -> str:
    """The Python block of docs/trainers.md that builds a GRPOTrainer."""
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    [block] = [b for b in blocks if "GRPOTrainer(" in b]
    return block


def tiny_model(directory: Path, texts: list[str]) -> None:
    """A 2-layer Qwen2 with random weights and a byte-level BPE tokenizer trained on `texts`, saved to `directory`."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=1024, special_tokens=special,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                        chat_template=CHAT_TEMPLATE)
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=8192,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
                         bos_token_id=None, tie_word_embeddings=True)
    Qwen2ForCausalLM(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)


@pytest.mark.filterwarnings("ignore:.*gradient_checkpointing.*:FutureWarning")  # transformers 5 renames, inside TRL
def test_trl_grpo_example_runs_with_the_tools_in_the_prompt(tmp_path, monkeypatch):
    import datasets
    from transformers import AutoTokenizer

    example = trl_example()
    assert SETTINGS_LINE in example  # the one line this test sets; the rest runs as the docs show it
    corpus = tmp_path / "corpus.parquet"
    export_dataset(TaskSetSpec(family="ops", count=2, split="train"), corpus)
    rows = datasets.load_dataset("parquet", data_files=str(corpus), split="train")
    model_dir = tmp_path / "tiny-qwen2"
    tiny_model(model_dir, [m["content"] for row in rows for m in row["prompt"]])

    rendered: list[str] = []  # what GRPOTrainer tokenized for the model, decoded (the real method, recorded)
    tokenizer_class = type(AutoTokenizer.from_pretrained(model_dir))
    original = tokenizer_class.apply_chat_template

    def recording(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        if kwargs.get("tokenize") and kwargs.get("return_dict"):
            rendered.extend(self.decode(ids) for ids in out["input_ids"])
        return out

    monkeypatch.setattr(tokenizer_class, "apply_chat_template", recording)
    monkeypatch.chdir(tmp_path)  # the example writes data/ and runs/ under the working directory
    settings = ("dict(max_steps=2, num_generations=2, per_device_train_batch_size=2, max_completion_length=8, "
                "use_cpu=True, bf16=False, save_strategy='no', logging_steps=1, seed=0)")
    namespace: dict = {}
    exec(compile(example.replace(SETTINGS_LINE, f"model_name, tasks, settings = {str(model_dir)!r}, 2, {settings}"),
                 str(DOC), "exec"), namespace)

    trainer, train, reward = namespace["trainer"], namespace["train"], namespace["reward"]
    assert trainer.state.global_step == 2
    assert [r for r in trainer.state.log_history if "loss" in r]  # two optimisation steps logged a loss
    assert len(reward.last_details) == 2 and {d["task_id"] for d in reward.last_details} <= set(train["task_id"])
    assert all(d["end_reason"] is not None for d in reward.last_details)  # each completion was run and scored

    assert rendered, "GRPOTrainer rendered no prompt through the chat template"
    by_goal = {json.loads(row["task"])["goal"]: json.loads(row["tools"]) for row in train}
    for prompt in rendered:
        [tools] = [t for goal, t in by_goal.items() if goal in prompt]
        assert tools_section(tools) in prompt  # every spec, as JSON, and the call syntax
        assert {t["function"]["name"] for t in tools} >= {"submit", "ship_order", "search_records"}


def test_a_qwen_style_tool_call_block_is_read():
    """Qwen's templates have a model write <tool_call>, the JSON on its own line, </tool_call>: the reward reads it."""
    text = 'I will look first.\n<tool_call>\n{"name": "get_status", "arguments": {}}\n</tool_call>'
    assert [(a.tool, a.arguments) for a in tool_calls_of([{"role": "assistant", "content": text}])] == [("get_status", {})]
