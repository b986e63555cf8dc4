"""The model client: providers and their quirks, the streamed call, tool-call assembly, errors."""
