"""The browser front: the Flask app's parts, the Socket.IO handlers, the hub of terminals,
batching and the cluster."""
