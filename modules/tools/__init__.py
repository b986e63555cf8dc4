"""The tools the model is offered: the registry, the catalogue, and each tool with what it needs."""
