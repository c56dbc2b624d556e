"""Optuna-backed Katib suggestion service and live pruning."""
