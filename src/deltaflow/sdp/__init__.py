"""Spark Declarative Pipelines projects under deltaflow: their spec, decorators and SQL files."""
