"""Going back from the embedding: pre-images by kernel ridge regression and its alpha, and the
feature-space reconstruction error (novelty)."""
