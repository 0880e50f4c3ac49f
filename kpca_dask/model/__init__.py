"""The estimators and what they keep on disk: model files and checkpoints."""
