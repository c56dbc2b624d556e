"""Katib DB-manager collector: TrainJob trainerStatus -> observation logs."""
