"""esbridge: exact modern lexical scoring on top of Elasticsearch and OpenSearch."""

__version__ = "0.1.0"
