"""Fine-tune DistilBERT on GLUE SST-2 with the Hugging Face Trainer: an ordinary script.

Nothing here mentions Katib, Kubeflow or katib-progress. Inside a Kubeflow TrainJob (Trainer
>= v2.2, feature gate TrainJobStatus) Transformers >= 4.57 registers ``KubeflowTrainerCallback``
on its own; it reports ``loss``, ``learning_rate``, ``epoch``, the progress percentage and the
``compute_metrics`` results (``eval_accuracy``, ``eval_loss``) into ``status.trainerStatus``.

Katib reads the objective once, when the trial ends, so the script finishes with an explicit
``trainer.evaluate()``: the last snapshot then carries the final ``eval_accuracy``.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

_log = logging.getLogger("hf-transformers")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--model", default="distilbert-base-uncased")
    p.add_argument("--learning-rate", type=float, default=5e-5)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--warmup-ratio", type=float, default=0.0)
    p.add_argument("--epochs", type=float, default=2.0)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--train-samples", type=int, default=20000)
    p.add_argument("--eval-steps", type=int, default=100)
    p.add_argument("--output-dir", default="/tmp/hf-out")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np
    from datasets import load_dataset
    from transformers import (
        AutoModelForSequenceClassification,
        AutoTokenizer,
        DataCollatorWithPadding,
        Trainer,
        TrainingArguments,
    )

    raw = load_dataset("glue", "sst2")
    tokenizer = AutoTokenizer.from_pretrained(args.model)

    def tokenize(batch: dict[str, Any]) -> Any:
        return tokenizer(batch["sentence"], truncation=True, max_length=128)

    train_ds = (
        raw["train"].shuffle(seed=args.seed).select(range(args.train_samples)).map(tokenize, batched=True)
    )
    eval_ds = raw["validation"].map(tokenize, batched=True)
    model = AutoModelForSequenceClassification.from_pretrained(args.model, num_labels=2)

    def compute_metrics(pred: Any) -> dict[str, float]:
        logits, labels = pred
        return {"accuracy": float((np.argmax(logits, axis=-1) == labels).mean())}

    training_args = TrainingArguments(
        output_dir=args.output_dir,
        learning_rate=args.learning_rate,
        weight_decay=args.weight_decay,
        warmup_ratio=args.warmup_ratio,
        num_train_epochs=args.epochs,
        per_device_train_batch_size=args.batch_size,
        per_device_eval_batch_size=2 * args.batch_size,
        eval_strategy="steps",
        eval_steps=args.eval_steps,
        logging_steps=args.eval_steps // 2,
        save_strategy="no",
        seed=args.seed,
    )
    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=train_ds,
        eval_dataset=eval_ds,
        data_collator=DataCollatorWithPadding(tokenizer),
        compute_metrics=compute_metrics,
    )
    trainer.train()
    final: dict[str, Any] = trainer.evaluate()
    _log.info("final evaluation: %s", final)
    return final


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    main(parse_args())
