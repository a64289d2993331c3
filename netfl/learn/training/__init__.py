"""Training: local SGD by the book and the fast paths that match it, and where torch computes."""
