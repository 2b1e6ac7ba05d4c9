"""esbridge's own engine nodes: the distributions installed from Maven Central and pinned
(:mod:`~esbridge.nodes.artifacts`, lock files in ``runners/``), the Java runtime they need
(:mod:`~esbridge.nodes.java`), single nodes and clusters on this machine (:mod:`~esbridge.nodes.local`,
:mod:`~esbridge.nodes.cluster`, the secured Elasticsearch 8 distribution in
:mod:`~esbridge.nodes.es_distribution`), the engine plugins esbridge builds for them
(:mod:`~esbridge.nodes.features_plugin`, sources in ``plugins/``), and the one way the command line,
the tests and CI get an engine (:mod:`~esbridge.nodes.provision`).  Connecting to a cluster is
:mod:`esbridge.engine`."""
