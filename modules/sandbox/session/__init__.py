"""A conversation's sandbox session: one long-lived sandbox for its commands and processes."""
