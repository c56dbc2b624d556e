"""A trial process for tests/test_examples_live.py: the hf-transformers example's Trainer, tiny and offline.

It runs the example's own ``build_trainer`` (its ``TrainingArguments`` and ``compute_metrics``) on a
randomly initialised 2-layer BERT built from a config, with a word-level tokenizer made from an
in-memory vocabulary and synthetic sentences: nothing is downloaded. The reporting is
Transformers' own ``KubeflowCallback``, switched on by the environment the local sweep gives a trial
(``KUBEFLOW_TRAINER_SERVER_URL`` and ``KUBEFLOW_TRAINER_SERVER_TOKEN``); this file adds no reporting.

Two knobs exist only to make a short run show what a long one shows:
``--min-update-interval`` overrides the callback's 5 s throttle between step updates (begin and
end updates are forced either way), and ``--step-sleep`` stands in for compute so that the ETA the
callback computes comes out at a whole second or more.

Writes ``{"log_history", "callbacks", "report_to", "transformers"}`` as JSON to ``--out``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

POSITIVE = ("good", "great", "fine", "superb")
NEGATIVE = ("bad", "awful", "poor", "dull")
NEUTRAL = ("the", "movie", "plot", "was", "and", "actors", "story", "very")
SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def _load_example(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location("hf_example_train", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sentences(count: int, rng: random.Random) -> list[dict[str, Any]]:
    rows = []
    for _ in range(count):
        label = rng.randrange(2)
        words = [rng.choice(NEUTRAL) for _ in range(rng.randint(3, 8))]
        words.insert(rng.randrange(len(words) + 1), rng.choice(POSITIVE if label else NEGATIVE))
        rows.append({"sentence": " ".join(words), "label": label})
    return rows


def _tokenized(rows: list[dict[str, Any]], tokenize: Any) -> list[dict[str, Any]]:
    batch = tokenize({"sentence": [row["sentence"] for row in rows]})
    return [
        {"input_ids": ids, "attention_mask": mask, "label": row["label"]}
        for ids, mask, row in zip(batch["input_ids"], batch["attention_mask"], rows, strict=True)
    ]


def run(ns: argparse.Namespace) -> dict[str, Any]:
    import transformers
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizer, TrainerCallback
    from transformers.integrations import KubeflowCallback

    if ns.min_update_interval is not None:
        KubeflowCallback._MIN_UPDATE_INTERVAL = ns.min_update_interval
    example = _load_example(ns.example)
    vocab = {word: i for i, word in enumerate(SPECIAL + POSITIVE + NEGATIVE + NEUTRAL)}
    tokenizer = BertTokenizer(vocab=vocab)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=32,
        num_labels=2,
    )
    transformers.set_seed(ns.seed)
    model = BertForSequenceClassification(config)
    rng = random.Random(ns.seed)
    tokenize = example.tokenize_fn(tokenizer)
    train_ds = _tokenized(_sentences(ns.train_samples, rng), tokenize)
    eval_ds = _tokenized(_sentences(ns.eval_samples, rng), tokenize)
    args = example.parse_args(
        [
            f"--learning-rate={ns.learning_rate}",
            f"--epochs={ns.epochs}",
            f"--batch-size={ns.batch_size}",
            f"--eval-steps={ns.eval_steps}",
            f"--output-dir={ns.output_dir}",
            f"--seed={ns.seed}",
        ]
    )
    trainer = example.build_trainer(args, model, tokenizer, train_ds, eval_ds)

    class _Compute(TrainerCallback):
        def on_step_begin(self, *_args: Any, **_kwargs: Any) -> None:
            time.sleep(ns.step_sleep)

    if ns.step_sleep > 0:
        trainer.add_callback(_Compute())
    trainer.train()
    return {
        "log_history": trainer.state.log_history,
        "final_evaluation": example.final_evaluation(trainer),
        "callbacks": [type(cb).__name__ for cb in trainer.callback_handler.callbacks],
        "report_to": list(trainer.args.report_to),
        "transformers": transformers.__version__,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--example", type=Path, required=True, help="examples/cluster/hf-transformers/train.py")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--output-dir", default="out")
    p.add_argument("--min-update-interval", type=float, default=None)
    p.add_argument("--step-sleep", type=float, default=0.0)
    p.add_argument("--train-samples", type=int, default=64)
    p.add_argument("--eval-samples", type=int, default=32)
    p.add_argument("--epochs", type=float, default=2.0)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--eval-steps", type=int, default=5)
    p.add_argument("--learning-rate", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    ns = p.parse_args(argv)
    result = run(ns)
    ns.out.write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
