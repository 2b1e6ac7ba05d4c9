"""Index definitions: the index body built from ``mappings/``, and the layout read back."""

from esbridge.index.definitions import (
    VECTOR_FIELD,
    IndexLayout,
    VectorField,
    build_index_body,
    create_index,
    read_layout,
)

__all__ = ["VECTOR_FIELD", "IndexLayout", "VectorField", "build_index_body", "create_index", "read_layout"]
