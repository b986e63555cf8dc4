"""Where commands run: the runner interface, the local sandbox (bubblewrap, limits) and Docker."""
