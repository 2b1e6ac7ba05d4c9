"""Index definitions: the index body built from ``mappings/``, the layout read back, and your
own (plain) indices: read as they are, or given esbridge's channels in place; and the list of the
indices esbridge made on an engine."""

from esbridge.index.definitions import (
    VECTOR_FIELD,
    IndexLayout,
    VectorField,
    build_index_body,
    create_index,
    document_vector_field,
    read_layout,
)
from esbridge.index.listing import IndexEntry, list_indices
from esbridge.index.plain import AddChannelsReport, add_channels, open_layout

__all__ = ["VECTOR_FIELD", "AddChannelsReport", "IndexEntry", "IndexLayout", "VectorField", "add_channels",
           "build_index_body", "create_index", "document_vector_field", "list_indices", "open_layout", "read_layout"]
