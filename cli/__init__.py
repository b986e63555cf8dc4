"""The terminal front: the interactive session, `-p`, the printer and its Markdown."""
