"""Market data: vendor files, Alpaca and a synthetic market in; calendar-aligned causal tensors out."""
