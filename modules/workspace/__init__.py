"""The workspace folder: confined paths, safe file access, the tree, the watcher, notes on files."""
