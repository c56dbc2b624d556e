"""Fine-tune DistilBERT on GLUE SST-2 with the Hugging Face Trainer: an ordinary script.

Nothing here mentions Katib, Kubeflow or katib-progress. Inside a Kubeflow TrainJob (Trainer
>= v2.2, feature gate TrainJobStatus) Transformers >= 5.4.0 adds its ``KubeflowCallback`` to
``report_to`` on its own (because ``KUBEFLOW_TRAINER_SERVER_URL`` is set) and POSTs into
``status.trainerStatus``:

- at train begin: progress 0 and ``total_steps``;
- after a step, at most once per 5 s: progress (capped at 99), the ETA, ``current_step``,
  ``total_steps``, ``current_epoch`` and the latest value of every number the Trainer logged so far
  (``loss``, ``learning_rate``, ``grad_norm``, ``epoch``, and the ``compute_metrics`` results as
  ``eval_accuracy``, ``eval_loss``, ...);
- at train end: progress 100, ETA 0 and the latest logged numbers.

The callback sends nothing after ``train()`` returns: a ``trainer.evaluate()`` called afterwards
would never reach the TrainJob. Katib reads the objective from the last snapshot, so the final
evaluation has to happen inside training. With ``eval_strategy="steps"`` the Trainer evaluates at
the last step too (``DefaultFlowCallback.on_step_end``), and the train-end snapshot carries it.
"""

from __future__ import annotations

import argparse
import logging
from typing import Any

_log = logging.getLogger("hf-transformers")


def _fraction(text: str) -> float:
    value = float(text)
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"{text} is not in [0, 1)")
    return value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    p.add_argument("--model", default="distilbert-base-uncased")
    p.add_argument("--learning-rate", type=float, default=5e-5)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--warmup-ratio", type=_fraction, default=0.0, help="fraction of steps, in [0, 1)")
    p.add_argument("--epochs", type=float, default=2.0)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--train-samples", type=int, default=20000)
    p.add_argument("--eval-steps", type=int, default=100)
    p.add_argument("--output-dir", default="/tmp/hf-out")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def compute_metrics(pred: Any) -> dict[str, float]:
    """Accuracy of the argmax class; the Trainer reports it as ``eval_accuracy``."""
    import numpy as np

    logits, labels = pred
    return {"accuracy": float((np.argmax(logits, axis=-1) == labels).mean())}


def tokenize_fn(tokenizer: Any) -> Any:
    def tokenize(batch: dict[str, Any]) -> Any:
        return tokenizer(batch["sentence"], truncation=True, max_length=128)

    return tokenize


def build_trainer(args: argparse.Namespace, model: Any, tokenizer: Any, train_ds: Any, eval_ds: Any) -> Any:
    """The Trainer for tokenized ``train_ds``/``eval_ds`` (rows with ``input_ids`` and ``label``)."""
    from transformers import DataCollatorWithPadding, Trainer, TrainingArguments

    training_args = TrainingArguments(
        output_dir=args.output_dir,
        learning_rate=args.learning_rate,
        weight_decay=args.weight_decay,
        # A float below 1 is a fraction of the training steps; ``warmup_ratio`` is deprecated in
        # 5.4 and no longer accepted by later 5.x releases.
        warmup_steps=args.warmup_ratio,
        num_train_epochs=args.epochs,
        per_device_train_batch_size=args.batch_size,
        per_device_eval_batch_size=2 * args.batch_size,
        # "steps" also evaluates at the last step, before the train-end status report.
        eval_strategy="steps",
        eval_steps=args.eval_steps,
        logging_steps=max(1, args.eval_steps // 2),
        save_strategy="no",
        seed=args.seed,
    )
    return Trainer(
        model=model,
        args=training_args,
        train_dataset=train_ds,
        eval_dataset=eval_ds,
        data_collator=DataCollatorWithPadding(tokenizer),
        compute_metrics=compute_metrics,
    )


def final_evaluation(trainer: Any) -> dict[str, float]:
    """The last evaluation the Trainer logged during training (what the last snapshot carries)."""
    evals = [entry for entry in trainer.state.log_history if "eval_loss" in entry]
    return dict(evals[-1]) if evals else {}


def main(args: argparse.Namespace) -> dict[str, float]:
    from datasets import load_dataset
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    raw = load_dataset("nyu-mll/glue", "sst2")
    tokenizer = AutoTokenizer.from_pretrained(args.model)
    tokenize = tokenize_fn(tokenizer)
    train_ds = (
        raw["train"].shuffle(seed=args.seed).select(range(args.train_samples)).map(tokenize, batched=True)
    )
    eval_ds = raw["validation"].map(tokenize, batched=True)
    model = AutoModelForSequenceClassification.from_pretrained(args.model, num_labels=2)
    trainer = build_trainer(args, model, tokenizer, train_ds, eval_ds)
    trainer.train()
    final = final_evaluation(trainer)
    _log.info("final evaluation: %s", final)
    return final


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    main(parse_args())
