"""Pieces of the training loop: recipes, distributed gathers, RNG replay, steps, checkpoints, dev evaluation."""
