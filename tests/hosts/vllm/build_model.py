"""Build the tiny models the real vLLM serves on the test hosts: offline, deterministic, nothing from a hub.

    VENV/bin/python tests/hosts/vllm/build_model.py OUT_DIR

writes OUT_DIR/tiny-moe (Qwen3MoeForCausalLM) and OUT_DIR/tiny-dense (Qwen3ForCausalLM), each with the
same byte-level BPE tokenizer (vocab 512, trained here on text this script generates, ChatML template),
random bf16 weights from a fixed seed, and OUT_DIR/SHA256SUMS over every file. Run it with the vLLM
venv's python (torch, transformers, tokenizers); install.sh does.
"""

from __future__ import annotations

import hashlib
import os
import random
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    GenerationConfig,
    PreTrainedTokenizerFast,
    Qwen3Config,
    Qwen3ForCausalLM,
    Qwen3MoeConfig,
    Qwen3MoeForCausalLM,
)

SEED = 0
VOCAB = 512
MAX_LEN = 2048
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
WORDS = (
    "the a an of to and in is it that for on with as was at by be this from or are not have had "
    "model server engine layout tensor pipeline expert parallel request token prompt cache memory "
    "start stop health ready failed restart unit journal host console switch metrics latency "
    "throughput queue batch decode prefill weight shard rank worker process thread core node "
    "hello world quick brown fox jumps over lazy dog one two three four five six seven eight nine ten "
    "red green blue small large fast slow early late first last good bad new old true false"
).split()


def corpus(seed: int = SEED) -> list[str]:
    """A few thousand deterministic lines: sentences, numbers, code-ish and chat-shaped text."""
    rng = random.Random(seed)
    lines = []
    for i in range(3000):
        kind = i % 5
        if kind == 0:
            words = [rng.choice(WORDS) for _ in range(rng.randint(4, 14))]
            lines.append(" ".join(words).capitalize() + rng.choice([".", "!", "?", ","]))
        elif kind == 1:
            lines.append(
                f"{rng.choice(WORDS)}_{rng.randint(0, 999)} = {rng.random():.4f}  # {rng.choice(WORDS)}"
            )
        elif kind == 2:
            lines.append(
                " ".join(str(rng.randint(0, 10 ** rng.randint(1, 6))) for _ in range(rng.randint(2, 8)))
            )
        elif kind == 3:
            role = rng.choice(["user", "assistant", "system"])
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 10)))
            lines.append(f"<|im_start|>{role}\n{text}<|im_end|>")
        else:
            lines.append(
                "".join(
                    rng.choice("abcdefghijklmnopqrstuvwxyz0123456789 .,:;()[]{}-+*/'\"") for _ in range(40)
                )
            )
    return lines


def build_tokenizer() -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
        model_max_length=MAX_LEN,
        clean_up_tokenization_spaces=False,
    )
    fast.chat_template = CHATML
    return fast


def common(tok: PreTrainedTokenizerFast) -> dict:
    return dict(
        vocab_size=len(tok),
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        intermediate_size=256,
        max_position_embeddings=MAX_LEN,
        tie_word_embeddings=False,
        bos_token_id=tok.convert_tokens_to_ids("<|endoftext|>"),
        eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tok.convert_tokens_to_ids("<|endoftext|>"),
    )


def save(model: torch.nn.Module, tok: PreTrainedTokenizerFast, out: Path) -> None:
    model.to(torch.bfloat16)
    model.config.dtype = torch.bfloat16
    model.generation_config = GenerationConfig(
        bos_token_id=model.config.bos_token_id,
        eos_token_id=[tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")],
        pad_token_id=model.config.pad_token_id,
    )
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)


def sha256sums(root: Path) -> str:
    lines = []
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.name != "SHA256SUMS"):
        lines.append(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.relative_to(root)}\n")
    return "".join(lines)


def main(out: Path) -> None:
    torch.use_deterministic_algorithms(True)
    tok = build_tokenizer()
    assert len(tok) == VOCAB, len(tok)
    torch.manual_seed(SEED)
    moe = Qwen3MoeForCausalLM(
        Qwen3MoeConfig(
            **common(tok),
            num_experts=4,
            num_experts_per_tok=2,
            moe_intermediate_size=64,
            decoder_sparse_step=1,
            mlp_only_layers=[],
            norm_topk_prob=True,
        )
    )
    save(moe, tok, out / "tiny-moe")
    torch.manual_seed(SEED)
    save(Qwen3ForCausalLM(Qwen3Config(**common(tok))), tok, out / "tiny-dense")
    (out / "SHA256SUMS").write_text(sha256sums(out))
    for name in ("tiny-moe", "tiny-dense"):
        digest = hashlib.sha256((out / name / "model.safetensors").read_bytes()).hexdigest()
        print(f"{name}/model.safetensors sha256 {digest}", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: build_model.py OUT_DIR")
    main(Path(sys.argv[1]))
