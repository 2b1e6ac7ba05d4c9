"""The connection to a cluster: :class:`~esbridge.engine.client.Engine` and
:class:`~esbridge.engine.async_client.AsyncEngine` (retries, failover, typed errors), how a cluster is
reached (:mod:`~esbridge.engine.connection`, :mod:`~esbridge.engine.transports`), and the requests
esbridge sends as plans (:mod:`~esbridge.engine.plan`, :mod:`~esbridge.engine.calls`).  Getting an
engine to connect to — esbridge's own local nodes, Docker — is :mod:`esbridge.nodes`."""
