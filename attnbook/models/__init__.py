"""The models (one-layer, K-class, two-layer, MLP head), their parameters, losses and
the one training loop."""
