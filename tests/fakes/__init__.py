"""Fakes of external services that tests drive real clients against, on 127.0.0.1 only."""
