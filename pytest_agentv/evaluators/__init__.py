"""Evaluator implementations; the protocol and the engine that runs them live in ``base``."""
