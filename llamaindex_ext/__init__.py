"""LlamaIndex components for Chain of Summaries."""
